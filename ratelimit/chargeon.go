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
// charged up front like any other, and the charge is given back when its
// response does not match. `status 401 403` limits failed logins and
// leaves successful ones free, however many arrive at once.
type ChargeOn struct {
	// Status lists the response status codes that are charged: final
	// statuses (200..599) or 101.
	Status []int `json:"status,omitempty"`
}

// Charging up front is what makes the limit hold under concurrency: a
// request in flight holds its share of the budget, so no more than the
// limit can be in flight (or answered) at once, whatever the caller's
// concurrency. Giving a charge back is a GCRA un-charge, bounded so that it
// never returns more than is left of that one charge (limit.giveBack): a
// key's charges form blocks, runs of charges since its TAT last passed;
// within one, every give-back is summed, and a request's hold records the
// sum at its charge, which bounds how far its charge may have moved down
// since. A request whose key started a new block (its charge used up by
// time) or was dropped gives nothing back.

// chargeWriter passes a response on and settles the handler's charge_on
// zones as soon as its status is known: when the header is written, so the
// give-back lands before the client can see the response; or, for a
// response that next returned as an error (for handle_errors, such as
// basic_auth's 401), when next returns, before handle_errors writes it.
type chargeWriter struct {
	*caddyhttp.ResponseWriterWrapper
	h       *Handler
	r       *http.Request
	keys    [maxZones]requestKey // copies: the caller's arrays stay on its stack
	holds   [maxZones]hold
	n       int
	active  zoneSet // zones that decided the request (on_empty_key skip leaves some out)
	decided bool
}

// settle settles for status once; a later call does nothing.
func (cw *chargeWriter) settle(status int) {
	if cw.decided {
		return
	}
	cw.decided = true
	cw.h.settle(cw.r, cw.keys[:cw.n], cw.holds[:cw.n], status, cw.active)
}

// WriteHeader settles for a final status (an informational one, but for
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

// serveCharged runs next through a chargeWriter and settles for a response
// next did not write: the status of the error it returned (500 for one
// without a status), or 200. A panic leaves the charges standing.
// cw holds the request's holds (decide wrote them).
func (h *Handler) serveCharged(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, cw *chargeWriter, keys []requestKey) error {
	cw.ResponseWriterWrapper = &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}
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

// serveHolding runs the rest of the route for a request holding slots of
// concurrent zones, and gives them back however the request ends: its
// response written, the client gone (the handlers return), an error, a
// panic (the deferred release runs as it unwinds), or after a reload (the
// zone's table outlives the config that took the slot).
func (h *Handler) serveHolding(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, cw *chargeWriter, keys *[maxZones]requestKey, active zoneSet) error {
	for i, z := range h.zones {
		if z.slots > 0 && active.has(i) {
			z.counters.inFlight.Inc()
		}
	}
	defer h.releaseSlots(keys, active)
	if h.charging {
		return h.serveCharged(w, r, next, cw, keys[:len(h.zones)])
	}
	return next.ServeHTTP(w, r)
}

// releaseSlots gives back the slots a request took in the active
// concurrent zones.
func (h *Handler) releaseSlots(keys *[maxZones]requestKey, active zoneSet) {
	for i, z := range h.zones {
		if z.slots > 0 && active.has(i) {
			releaseSlot(z, keys[i].hash())
			z.counters.inFlight.Dec()
		}
	}
}

// settle keeps the up-front charge of every charge_on zone whose statuses
// include status (counted as charged) and gives back the others'. A store
// failure is logged and counted; the response stands, and the charges it
// could not give back stay (the strict side).
func (h *Handler) settle(r *http.Request, keys []requestKey, holds []hold, status int, active zoneSet) {
	var back [maxZones]bool
	some := false
	for i, z := range h.zones {
		if z.chargeOn == nil || !active.has(i) {
			continue
		}
		if slices.Contains(z.chargeOn, status) {
			z.counters.charged.Inc()
		} else {
			back[i], some = true, true
		}
	}
	if !some {
		return
	}
	if h.redis != nil {
		if err := h.redis.giveBack(r.Context(), keys, holds, back[:len(keys)]); err != nil {
			throttleMetrics.storeErrors.Inc()
			h.logger.Warn("rate limit store failed; charge not given back", zap.Int("status", status), zap.Error(err))
		}
		return
	}
	now := h.clockNow() // when the response is known, not when the request arrived
	for i, z := range h.zones {
		if back[i] {
			refundMemory(z, keys[i].hash(), holds[i], now)
		}
	}
}
