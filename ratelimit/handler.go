package ratelimit

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// ObservedVar is the request variable set, in observe mode, to the name of
// the zone that would have rejected the request (for logs and matchers).
const ObservedVar = "throttle_observed"

// errUnavailable is what on_error deny answers while Redis cannot decide.
var errUnavailable = errors.New("throttle: rate limit store unavailable")

// ServeHTTP decides the request in every zone, then passes it on or
// rejects it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	var keys [maxZones]requestKey
	var out [maxZones]outcome
	n := len(h.zones)
	for i, z := range h.zones {
		if j := h.sameKey[i]; j >= 0 {
			keys[i] = keys[j]
		} else {
			keys[i] = z.key.key(r)
		}
	}
	// Only charge_on zones are given back; their holds go where the
	// response writer that settles them keeps them, and a handler without
	// charge_on zones pays nothing for them.
	var cw *chargeWriter
	var hs []hold
	if h.charging {
		cw = &chargeWriter{h: h, r: r, n: n}
		hs = cw.holds[:n]
		// Its give-back comes after next, maybe after a reload cleaned h
		// up: the Redis client must outlive it.
		if h.redis != nil && h.redis.hold() {
			defer h.redis.unhold()
		}
	}
	allowed, err := h.decide(r, keys[:n], out[:n], hs)
	if err != nil {
		throttleMetrics.storeErrors.Inc()
		// Real failures are few (the breaker opens after a handful); while
		// it is open, every request would log the same line.
		level := zap.WarnLevel
		if errors.Is(err, errBreakerOpen) {
			level = zap.DebugLevel
		}
		if h.Store.Redis.OnError == OnErrorDeny {
			h.logger.Log(level, "rate limit store failed; denying (on_error deny)", zap.Error(err))
			w.Header().Set("Retry-After", "1")
			return caddyhttp.Error(http.StatusServiceUnavailable, errUnavailable)
		}
		h.logger.Log(level, "rate limit store failed; allowing (on_error allow)", zap.Error(err))
		return next.ServeHTTP(w, r)
	}
	if h.headers {
		h.setHeaders(w.Header(), keys[:n], out[:n])
	}
	if allowed {
		for _, z := range h.zones {
			z.counters.allowed.Inc()
		}
		if h.charging {
			return h.serveCharged(w, r, next, cw, keys[:n])
		}
		return next.ServeHTTP(w, r)
	}
	// Every zone that said no is counted; the first (in lock order) names
	// the rejection; the longest wait among them is when it would pass.
	by := -1
	var wait time.Duration
	for i, z := range h.zones {
		if out[i].allowed {
			continue
		}
		if by < 0 {
			by = i
		}
		wait = max(wait, z.limit.wait(out[i]))
		if h.observe {
			z.counters.observed.Inc()
		} else {
			z.counters.rejected.Inc()
		}
	}
	z := h.zones[by]
	if h.observe {
		caddyhttp.SetVar(r.Context(), ObservedVar, z.name)
		// The partition key, never the key: a key may be a credential.
		h.logger.Info("would reject (observe mode)",
			zap.String("zone", z.name), zap.String("pk", keys[by].pkString()))
		return next.ServeHTTP(w, r)
	}
	w.Header().Set("Retry-After", strconv.FormatInt(max(1, ceilSeconds(wait)), 10))
	if h.writeProblem(w, r) {
		return nil
	}
	return caddyhttp.Error(h.Status, z.reject)
}

// decide asks the store about every zone at once; holds (nil without
// charge_on zones) receives what giving back each charge_on zone's charge
// takes.
func (h *Handler) decide(r *http.Request, keys []requestKey, out []outcome, holds []hold) (bool, error) {
	if h.redis != nil {
		return h.redis.decide(r.Context(), keys, out, holds)
	}
	var hashes [maxZones]uint64
	for i := range keys {
		hashes[i] = keys[i].hash()
	}
	return decideMemory(h.zones, hashes[:len(keys)], h.clock(r), out, holds), nil
}

// clock is when the request arrived, on the memory store's clock. Caddy
// already read the time when the request began; reusing it spares a clock
// read, which costs more than the whole decision on some virtual machines.
func (h *Handler) clock(r *http.Request) int64 {
	if h.now == nil {
		if t, ok := caddyhttp.GetVar(r.Context(), "start_time").(time.Time); ok {
			return sinceStart(t)
		}
	}
	return h.clockNow()
}

// clockNow is now on the memory store's clock.
func (h *Handler) clockNow() int64 {
	if h.now != nil {
		return h.now()
	}
	return monotonicNow()
}

// setHeaders writes RateLimit-Policy and RateLimit (see headers.go): one
// list member per zone, each with the caller's partition key.
//
// Both fields take their value from one two-element array (one allocation,
// as net/textproto does), each capped so an Add to one cannot touch the
// other: Caddy's header handler replaces values in place.
func (h *Handler) setHeaders(hdr http.Header, keys []requestKey, out []outcome) {
	var pks [maxZones][pkSize]byte
	for i := range h.zones {
		if j := h.sameKey[i]; j >= 0 {
			pks[i] = pks[j]
		} else {
			pks[i] = keys[i].pk()
		}
	}
	vals := new([2]string)
	var buf [512]byte
	b := buf[:0]
	for i := range h.zones {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, h.policies[i]...)
		b = appendPK(b, &pks[i])
	}
	vals[0] = string(b)
	b = buf[:0]
	for i, z := range h.zones {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendState(b, z, out[i])
		b = appendPK(b, &pks[i])
	}
	vals[1] = string(b)
	hdr["Ratelimit-Policy"] = vals[0:1:1]
	hdr["Ratelimit"] = vals[1:2:2]
}
