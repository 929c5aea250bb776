// Package ratelimit is the throttle handler: per-caller rate limiting with
// GCRA, in named zones shared across sites and reloads, kept in process
// memory or in Redis shared by a fleet of Caddy nodes.
package ratelimit

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler limits how often each caller may make requests. Every zone is
// checked; a request passes only if all of them allow it, and one rejected
// by any zone consumes nothing in any zone. A rejection returns an HTTP
// error (429 by default) with Retry-After, so `handle_errors` applies; a
// client that accepts application/problem+json on a server without
// handle_errors gets RFC 9457 problem details instead (problem.go).
type Handler struct {
	// Zones to check, each with its own key, rate and burst.
	Zones []*Zone `json:"zones,omitempty"`
	// Store holds the zones' state; default memory.
	Store *Store `json:"store,omitempty"`
	// Mode is `enforce` (default) or `observe`: observe never rejects but
	// counts, logs and marks (variable `throttle_observed`) what enforce
	// would have rejected.
	Mode Mode `json:"mode,omitempty"`
	// Status of a rejection; default 429.
	Status int `json:"status,omitempty"`
	// Headers adds RateLimit-Policy and RateLimit to every response; default
	// true.
	Headers *bool `json:"headers,omitempty"`
	// LogRejections is the level of the line each rejection logs (zone,
	// partition key, rule; never the key): debug, info (default), warn,
	// error, or off.
	LogRejections LogLevel `json:"log_rejections,omitempty"`

	zones   []*zone // sorted by seq: the memory store's lock order
	redis   *redisBackend
	owner   any
	now     func() int64 // tests inject a clock; else the request's start time
	logger  *zap.Logger
	headers bool
	observe bool
	// charging: some zone has charge_on.
	charging bool
	// slotted: some zone is concurrent, whose slots are released when the
	// request ends.
	slotted bool
	// rejectLog: rejections are logged, at rejectLevel.
	rejectLog   bool
	rejectLevel zapcore.Level
	// policies[i] is zone i's RateLimit-Policy member but for its pk.
	policies []string
	// sameKey[i] is the first zone before i with the same key, whose
	// request key zone i reuses; -1 if none.
	sameKey []int
}

// Store selects where zone state lives.
type Store struct {
	// Type is `memory` (default) or `redis`.
	Type StoreType `json:"type,omitempty"`
	// MaxKeys bounds each memory zone; default 1,000,000.
	MaxKeys int `json:"max_keys,omitempty"`
	// Redis configures the redis store.
	Redis *RedisStore `json:"redis,omitempty"`
}

const (
	defaultMaxKeys = 1_000_000
	defaultTimeout = 100 * time.Millisecond
)

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.throttle",
		New: func() caddy.Module { return new(Handler) },
	}
}

// processStart anchors the memory store's clock, which must agree across
// every handler and config generation of this process.
var processStart = time.Now()

func monotonicNow() int64 { return sinceStart(time.Now()) }

// sinceStart is t on the memory store's clock: nanoseconds since the process
// started, from the monotonic readings (never negative, never zero).
func sinceStart(t time.Time) int64 { return max(1, int64(t.Sub(processStart))) }

// Provision sets defaults, compiles each zone and attaches it to its shared
// state.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if h.Store == nil {
		h.Store = &Store{}
	}
	if h.Store.Type == "" {
		h.Store.Type = StoreMemory
	}
	if h.Store.Type == StoreMemory && h.Store.MaxKeys == 0 {
		h.Store.MaxKeys = defaultMaxKeys
	}
	if r := h.Store.Redis; r != nil {
		if r.KeyPrefix == "" {
			r.KeyPrefix = "throttle:"
		}
		if r.Timeout == 0 {
			r.Timeout = caddy.Duration(defaultTimeout)
		}
		if r.OnError == "" {
			r.OnError = OnErrorAllow
		}
	}
	if h.Mode == "" {
		h.Mode = ModeEnforce
	}
	if h.Status == 0 {
		h.Status = 429
	}
	if h.LogRejections == "" {
		h.LogRejections = LogInfo
	}
	h.rejectLog = h.LogRejections != LogOff
	h.rejectLevel, _ = zapcore.ParseLevel(string(h.LogRejections))
	h.headers = h.Headers == nil || *h.Headers
	h.observe = h.Mode == ModeObserve
	if err := h.Validate(); err != nil {
		return err
	}
	if err := h.compileZones(); err != nil {
		return err
	}
	// The config generation is the config's lifetime, which Caddy ends by
	// canceling its context: modules of one config get that context or
	// one derived by value (the http app adds each server), which keep its
	// Done channel; each load gets a new one.
	gen := ctx.Done()
	if gen == nil {
		return fmt.Errorf("throttle: provisioned with a context that is never canceled: provision within a config (caddy.NewContext)")
	}
	h.owner = gen
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("throttle: registering metrics: %w", err)
	}

	maxKeys := 0
	if h.Store.Type == StoreMemory {
		maxKeys = h.Store.MaxKeys
	} else {
		b, err := newRedisBackend(h.Store.Redis, h.logger)
		if err != nil {
			return fmt.Errorf("throttle: redis store: %v", err)
		}
		h.redis = b
	}
	for _, z := range h.zones {
		if err := z.claim(h.owner, h.storeName(), maxKeys); err != nil {
			return fmt.Errorf("throttle: %v", err)
		}
		z.counters = newZoneCounters(z.name, z.key.onEmpty, z.slots > 0)
	}
	slices.SortFunc(h.zones, func(a, b *zone) int { return cmp.Compare(a.seq, b.seq) })
	if h.redis != nil {
		h.redis.prepare(h.zones)
	}
	h.sameKey = h.sameKey[:0]
	for i, z := range h.zones {
		same := slices.IndexFunc(h.zones[:i], func(y *zone) bool { return y.key == z.key })
		h.sameKey = append(h.sameKey, same)
	}
	h.policies = make([]string, len(h.zones))
	h.charging, h.slotted = false, false
	for i, z := range h.zones {
		h.charging = h.charging || z.chargeOn != nil
		h.slotted = h.slotted || z.slots > 0
		if z.slots > 0 {
			h.policies[i] = slotsPolicyItem(z.name, z.slots)
		} else {
			h.policies[i] = policyItem(z.name, z.rate, z.burst)
		}
	}
	return nil
}

func (h *Handler) storeName() string {
	if h.redis != nil {
		return h.redis.store
	}
	return "memory"
}

// Validate refuses a handler that makes no sense.
func (h *Handler) Validate() error {
	if err := checkZoneCount(len(h.Zones)); err != nil {
		return err
	}
	if _, err := parseStoreType(string(h.Store.Type)); err != nil {
		return err
	}
	switch h.Store.Type {
	case StoreMemory:
		if err := checkMaxKeys(h.Store.MaxKeys); err != nil {
			return err
		}
		if h.Store.Redis != nil {
			return fmt.Errorf("throttle: store memory has redis settings: set type redis or remove them")
		}
	case StoreRedis:
		r := h.Store.Redis
		if r == nil || r.Address == "" {
			return fmt.Errorf("throttle: store redis: address is required (host:port)")
		}
		if err := checkDB(r.DB); err != nil {
			return err
		}
		if err := checkTimeout(time.Duration(r.Timeout)); err != nil {
			return err
		}
		if _, err := parseOnError(string(r.OnError)); err != nil {
			return err
		}
		if err := checkTLS(r.TLS); err != nil {
			return err
		}
		resolved, err := r.resolved()
		if err != nil {
			return fmt.Errorf("throttle: store redis: %v", err)
		}
		if err := checkKeyPrefix(resolved.KeyPrefix); err != nil {
			return err
		}
	}
	if _, err := parseMode(string(h.Mode)); err != nil {
		return err
	}
	if _, err := parseLogLevel(string(h.LogRejections)); err != nil {
		return err
	}
	if h.Store.Type == StoreRedis {
		for _, z := range h.Zones {
			if z != nil && z.Concurrent != 0 {
				return zoneError(z.Name, errConcurrentRedis)
			}
		}
	}
	return checkStatus(h.Status)
}

// compileZones checks and compiles every zone.
func (h *Handler) compileZones() error {
	seen := make(map[string]bool)
	h.zones = h.zones[:0]
	for _, zc := range h.Zones {
		z, err := compileZone(zc)
		if err != nil {
			return err
		}
		if seen[z.name] {
			return fmt.Errorf("throttle: zone %q declared twice in one handler: give each zone its own name", z.name)
		}
		seen[z.name] = true
		h.zones = append(h.zones, z)
	}
	return nil
}

func compileZone(zc *Zone) (*zone, error) {
	if zc == nil || zc.Name == "" {
		return nil, fmt.Errorf("throttle: zone without a name: give each zone a name")
	}
	if zc.Key == "" {
		zc.Key = defaultKey
	}
	if zc.OnEmptyKey == "" {
		zc.OnEmptyKey = EmptyKeyClientIP
	}
	onEmpty, err := parseOnEmptyKey(zc.Name, string(zc.OnEmptyKey))
	if err != nil {
		return nil, err
	}
	if zc.IPv4Prefix == 0 {
		zc.IPv4Prefix = 32
	}
	if zc.IPv6Prefix == 0 {
		zc.IPv6Prefix = 64
	}
	if err := checkIPv4Prefix(zc.Name, zc.IPv4Prefix); err != nil {
		return nil, err
	}
	if err := checkIPv6Prefix(zc.Name, zc.IPv6Prefix); err != nil {
		return nil, err
	}
	k, err := checkKey(zc.Name, zc.Key)
	if err != nil {
		return nil, err
	}
	k.v4bits, k.v6bits, k.onEmpty = zc.IPv4Prefix, zc.IPv6Prefix, onEmpty
	if zc.Concurrent != 0 {
		if err := checkConcurrent(zc); err != nil {
			return nil, err
		}
		rule := "concurrent " + strconv.FormatInt(zc.Concurrent, 10)
		return &zone{
			name:   zc.Name,
			key:    k,
			slots:  zc.Concurrent,
			rule:   rule,
			quoted: sfString(zc.Name),
			reject: fmt.Errorf("throttle: zone %s: %s: too many requests in flight", strconv.Quote(zc.Name), rule),
		}, nil
	}
	r, err := checkRate(zc.Name, zc.Rate)
	if err != nil {
		return nil, err
	}
	burst := defaultBurst(r)
	if zc.Burst != nil {
		burst = *zc.Burst
	}
	if err := checkBurst(zc.Name, burst, r); err != nil {
		return nil, err
	}
	var chargeOn []int
	if zc.ChargeOn != nil {
		if err := checkChargeOn(zc.Name, zc.ChargeOn.Status); err != nil {
			return nil, err
		}
		chargeOn = slices.Sorted(slices.Values(zc.ChargeOn.Status))
	}
	return &zone{
		chargeOn: chargeOn,
		name:     zc.Name,
		key:      k,
		rate:     r,
		burst:    burst,
		limit:    newLimit(r, burst),
		rule:     "rate " + zc.Rate + " burst " + strconv.FormatInt(burst, 10),
		quoted:   sfString(zc.Name),
		reject:   fmt.Errorf("throttle: zone %s: rate limit exceeded", strconv.Quote(zc.Name)),
	}, nil
}

// errConcurrentRedis says why a concurrent zone needs the memory store.
var errConcurrentRedis = fmt.Errorf("concurrent needs store memory: on Redis, a slot held by a Caddy node that crashes or loses Redis would never be released (the zone would shrink for good) unless slots were leases renewed while each request runs, which this store does not do; limit in flight per node with the memory store, next to the Redis zones in another throttle")

// Cleanup lets go of the shared zones and Redis client. Requests still in
// flight (a reload does not wait for them) settle on what they were charged
// on: h.redis stays set, and its client stays open until they are done.
func (h *Handler) Cleanup() error {
	for _, z := range h.zones {
		z.release()
	}
	if h.redis != nil {
		h.redis.release()
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
