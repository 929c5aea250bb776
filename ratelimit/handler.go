package ratelimit

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// ObservedVar is the request variable set, in observe mode, to the name of
// the zone that would have rejected the request (for logs and matchers).
const ObservedVar = "throttle_observed"

// RejectedVar is the request variable set to the name of the zone that
// rejected the request: {http.vars.throttle_rejected} in handle_errors and
// access logs (log_append).
const RejectedVar = "throttle_rejected"

// errUnavailable is what on_error deny answers while Redis cannot decide.
var errUnavailable = errors.New("throttle: rate limit store unavailable")

// zoneSet is a set of a handler's zones by index (maxZones bits).
type zoneSet uint8

const allZones = zoneSet(1<<maxZones - 1)

// The Caddy variables of server_timing's contract (docs/server-timing.md):
// it sets serverTimingOn to true for the handlers inside it, and reads the
// time.Duration this handler leaves in serverTimingThrottle.
const (
	serverTimingOn       = "server_timing"
	serverTimingThrottle = "server_timing.throttle"
)

func (s zoneSet) has(i int) bool { return s&(1<<i) != 0 }

// ServeHTTP decides the request in every zone, then passes it on or
// rejects it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	var keys [maxZones]requestKey
	var out [maxZones]outcome
	n := len(h.zones)
	vars := varsOf(r)
	// active are the zones that decide this request: all, but for those
	// whose key was empty under on_empty_key skip.
	active, denied := allZones, -1
	for i, z := range h.zones {
		if j := h.sameKey[i]; j >= 0 {
			keys[i] = keys[j]
			if !active.has(j) {
				active &^= 1 << i
			}
			continue
		}
		var empty bool
		if keys[i], empty = z.key.key(r, vars); empty {
			if !h.emptyKey(r, vars, i, &keys[i]) {
				if z.key.onEmpty == EmptyKeyDeny && denied < 0 {
					denied = i
				}
				active &^= 1 << i
			}
		}
	}
	if denied >= 0 {
		if done, err := h.denyEmpty(w, r, denied); done {
			return err
		}
	}
	// Only charge_on zones are given back; their holds go where the
	// response writer that settles them keeps them, and a handler without
	// charge_on zones pays nothing for them.
	var cw *chargeWriter
	var hs []hold
	if h.charging {
		cw = &chargeWriter{h: h, r: r, n: n, active: active}
		hs = cw.holds[:n]
		// Its give-back comes after next, maybe after a reload cleaned h
		// up: the Redis client must outlive it.
		if h.redis != nil && h.redis.hold() {
			defer h.redis.unhold()
		}
	}
	// server_timing reports the decision's time (docs/server-timing.md);
	// without it, this costs one variable lookup.
	timed, _ := vars[serverTimingOn].(bool)
	var decideStart time.Time
	if timed {
		decideStart = time.Now()
	}
	allowed, err := h.decide(r, vars, keys[:n], out[:n], hs, active)
	if timed {
		caddyhttp.SetVar(r.Context(), serverTimingThrottle, time.Since(decideStart))
	}
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
		h.setHeaders(w.Header(), keys[:n], out[:n], active)
	}
	if allowed {
		for i, z := range h.zones {
			if active.has(i) {
				z.counters.allowed.Inc()
			}
		}
		if h.slotted {
			return h.serveHolding(w, r, next, cw, &keys, active)
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
		if out[i].allowed || !active.has(i) {
			continue
		}
		if by < 0 {
			by = i
		}
		wait = max(wait, z.wait(out[i]))
		if h.observe {
			z.counters.observed.Inc()
		} else {
			z.counters.rejected.Inc()
		}
	}
	z := h.zones[by]
	rule := z.rule
	if out[by].full {
		rule = z.rule + ": key table full (max_keys)"
	}
	if h.observe {
		caddyhttp.SetVar(r.Context(), ObservedVar, z.name)
		// The partition key, never the key: a key may be a credential.
		h.logger.Info("would reject (observe mode)",
			zap.String("zone", z.name), zap.String("pk", keys[by].pkString()), zap.String("rule", rule))
		return next.ServeHTTP(w, r)
	}
	retryAfter := max(1, ceilSeconds(wait))
	h.logRejection(r, z, &keys[by], rule, retryAfter)
	w.Header().Set("Retry-After", strconv.FormatInt(retryAfter, 10))
	if h.writeProblem(w, r) {
		return nil
	}
	return caddyhttp.Error(h.Status, z.reject)
}

// emptyKey applies zone i's on_empty_key to a request whose key expanded
// to nothing: counted, and said once per zone with the fix. It reports
// whether the zone still decides the request (client_ip: keyed on the
// caller's address instead, in *rk).
func (h *Handler) emptyKey(r *http.Request, vars map[string]any, i int, rk *requestKey) bool {
	z := h.zones[i]
	z.counters.empty.Inc()
	if !z.warnedEmpty.Load() && z.warnedEmpty.CompareAndSwap(false, true) {
		fields := []zap.Field{zap.String("zone", z.name), zap.String("key", z.key.template), zap.String("on_empty_key", string(z.key.onEmpty))}
		if strings.Contains(z.key.template, "{http.auth.") {
			fields = append(fields, zap.String("fix", "{http.auth.*} is set by authentication (basic_auth, forward_auth...), which by default runs after throttle: add `order throttle after basic_auth` to the global options, or put both in a route in that order"))
		}
		h.logger.Warn("key expanded to nothing (said once per zone; counted in caddy_throttle_empty_keys_total)", fields...)
	}
	if z.key.onEmpty == EmptyKeyClientIP {
		*rk = z.key.callerAddr(r, vars)
		return true
	}
	return false
}

// denyEmpty rejects a request whose key in zone i expanded to nothing
// under on_empty_key deny (in observe mode, it is counted, logged and
// marked, and goes on: done false). No Retry-After: waiting gives it no
// key.
func (h *Handler) denyEmpty(w http.ResponseWriter, r *http.Request, i int) (done bool, err error) {
	z := h.zones[i]
	const rule = "on_empty_key deny"
	var none requestKey
	if h.observe {
		z.counters.observed.Inc()
		caddyhttp.SetVar(r.Context(), ObservedVar, z.name)
		h.logger.Info("would reject (observe mode)", zap.String("zone", z.name), zap.String("pk", none.pkString()), zap.String("rule", rule))
		return false, nil
	}
	z.counters.rejected.Inc()
	h.logRejection(r, z, &none, rule, 0)
	if h.writeProblem(w, r) {
		return true, nil
	}
	return true, caddyhttp.Error(h.Status, z.reject)
}

// logRejection marks the request with the refusing zone (RejectedVar) and
// logs the rejection at log_rejections' level: the zone, the caller's
// partition key (never the key, which may be a credential) and the rule.
func (h *Handler) logRejection(r *http.Request, z *zone, rk *requestKey, rule string, retryAfter int64) {
	caddyhttp.SetVar(r.Context(), RejectedVar, z.name)
	if !h.rejectLog {
		return
	}
	if ce := h.logger.Check(h.rejectLevel, "rejected"); ce != nil {
		fields := []zap.Field{zap.String("zone", z.name), zap.String("pk", rk.pkString()), zap.String("rule", rule), zap.Int("status", h.Status)}
		if retryAfter > 0 {
			fields = append(fields, zap.Int64("retry_after", retryAfter))
		}
		ce.Write(fields...)
	}
}

// decide asks the store about the active zones at once; holds (nil without
// charge_on zones) receives what giving back each charge_on zone's charge
// takes. vars are r's Caddy variables.
func (h *Handler) decide(r *http.Request, vars map[string]any, keys []requestKey, out []outcome, holds []hold, active zoneSet) (bool, error) {
	if h.redis != nil {
		return h.redis.decide(r.Context(), keys, out, holds, active)
	}
	var hashes [maxZones]uint64
	for i := range keys {
		hashes[i] = keys[i].hash()
	}
	return decideMemory(h.zones, hashes[:len(keys)], h.clock(vars), out, holds, active), nil
}

// clock is when the request arrived, on the memory store's clock. Caddy
// already read the time when the request began; reusing it spares a clock
// read, which costs more than the whole decision on some virtual machines.
// vars are the request's Caddy variables.
func (h *Handler) clock(vars map[string]any) int64 {
	if h.now == nil {
		if t, ok := vars["start_time"].(time.Time); ok {
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
// list member per zone, each with the caller's partition key. A zone left
// out of the request (on_empty_key) has no RateLimit member: it says
// nothing about this caller.
//
// Both values are built on the stack, each pk's base64 once, then copied
// into one allocation that holds the two-element array both fields take
// their value from and the bytes of both values (newFieldValues). Each
// value slice is capped so an Add to one cannot touch the other: Caddy's
// header handler replaces values in place.
func (h *Handler) setHeaders(hdr http.Header, keys []requestKey, out []outcome, active zoneSet) {
	var pks [maxZones][pkParamSize]byte
	for i := range h.zones {
		if j := h.sameKey[i]; j >= 0 {
			pks[i] = pks[j]
		} else if active.has(i) {
			pk := keys[i].pk()
			writePKParam(&pks[i], &pk)
		}
	}
	var buf [1024]byte
	b := buf[:0]
	for i := range h.zones {
		if !active.has(i) {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = append(b, h.policies[i]...)
		b = append(b, pks[i][:]...)
	}
	if len(b) == 0 {
		return
	}
	policyLen := len(b)
	first := true
	for i, z := range h.zones {
		if !active.has(i) {
			continue
		}
		if !first {
			b = append(b, ", "...)
		}
		first = false
		b = appendState(b, z, out[i])
		b = append(b, pks[i][:]...)
	}
	vals := newFieldValues(b, policyLen)
	hdr["Ratelimit-Policy"] = vals[0:1:1]
	hdr["Ratelimit"] = vals[1:2:2]
}
