package ratelimit

import (
	"errors"
	"io"
	"net/http"
	"slices"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// ChargeOn makes a zone charge a request by its outcome: the request is
// still refused up front while its key is over the limit, but it uses up
// budget only if its response matches. `status 401 403` limits failed
// logins and leaves successful ones free.
type ChargeOn struct {
	// Status lists the response status codes that are charged.
	Status []int `json:"status,omitempty"`
}

// chargeWriter passes a response on and charges the handler's charge_on
// zones as soon as its status is known: when the header is written, so the
// charge lands before the client can see the response; or, for a response
// that next returned as an error (for handle_errors, such as basic_auth's
// 401), when next returns, before handle_errors writes it.
type chargeWriter struct {
	*caddyhttp.ResponseWriterWrapper
	h       *Handler
	r       *http.Request
	keys    [maxZones]requestKey // a copy: the caller's array stays on its stack
	n       int
	decided bool
}

// settle charges for status once; a later call does nothing.
func (cw *chargeWriter) settle(status int) {
	if cw.decided {
		return
	}
	cw.decided = true
	cw.h.charge(cw.r, cw.keys[:cw.n], status)
}

// WriteHeader charges for a final status (an informational one, but for
// 101 Switching Protocols, is not the response's status yet).
func (cw *chargeWriter) WriteHeader(status int) {
	if status >= 200 || status == http.StatusSwitchingProtocols {
		cw.settle(status)
	}
	cw.ResponseWriter.WriteHeader(status)
}

func (cw *chargeWriter) Write(b []byte) (int, error) {
	cw.settle(http.StatusOK)
	return cw.ResponseWriter.Write(b)
}

func (cw *chargeWriter) ReadFrom(r io.Reader) (int64, error) {
	cw.settle(http.StatusOK)
	return cw.ResponseWriterWrapper.ReadFrom(r)
}

// serveCharged runs next through a chargeWriter and charges for a response
// next did not write: the status of the error it returned (500 for one
// without a status), or 200.
func (h *Handler) serveCharged(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, keys []requestKey) error {
	cw := &chargeWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, h: h, r: r, n: len(keys)}
	copy(cw.keys[:], keys)
	err := next.ServeHTTP(cw, r)
	status := http.StatusOK
	if err != nil {
		status = http.StatusInternalServerError
		var he caddyhttp.HandlerError
		if errors.As(err, &he) && he.StatusCode != 0 {
			status = he.StatusCode
		}
	}
	cw.settle(status)
	return err
}

// charge adds one request to every charge_on zone whose statuses include
// status. A store failure is logged and counted; the response stands.
func (h *Handler) charge(r *http.Request, keys []requestKey, status int) {
	var which [maxZones]bool
	some := false
	for i, z := range h.zones {
		if z.chargeOn != nil && slices.Contains(z.chargeOn, status) {
			which[i], some = true, true
		}
	}
	if !some {
		return
	}
	if h.redis != nil {
		if err := h.redis.charge(r.Context(), keys, which[:len(keys)]); err != nil {
			throttleMetrics.storeErrors.Inc()
			h.logger.Warn("rate limit store failed; response not charged", zap.Int("status", status), zap.Error(err))
			return
		}
	} else {
		now := h.clockNow() // when the response is known, not when the request arrived
		for i, z := range h.zones {
			if which[i] {
				chargeMemory(z, keys[i].hash(), now)
			}
		}
	}
	for i, z := range h.zones {
		if which[i] {
			z.counters.charged.Inc()
		}
	}
}
