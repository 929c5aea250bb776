package ratelimit

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/rueidis"
	"go.uber.org/zap"
)

// gcraScript decides one request for every zone at once, atomically, on the
// server's clock (so Caddy nodes' clocks never matter). KEYS are one key
// per zone; ARGV holds each zone's interval and tolerance in microseconds
// and its kind: 1 a plain zone, whose value is its TAT; 2 a charge_on
// zone, whose value is `<TAT> <given back> <block>` (chargeon.go), a block
// starting when a charge finds the TAT passed (its name is that moment).
// Nothing is written unless every zone allows the request. It returns
// {all allowed, allowed_1, after_1, allowed_2, after_2, ...}, after_i
// being TAT - now in microseconds once decided, then for each charge_on
// zone in order its hold: the TAT after its charge, given back and block.
var gcraScript = rueidis.NewLuaScript(gcraSource)

// gcraSHA1 is gcraSource's SHA-1, as EVALSHA names it.
var gcraSHA1 = func() string { sum := sha1.Sum([]byte(gcraSource)); return hex.EncodeToString(sum[:]) }()

const gcraSource = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = #KEYS
local tats, given, blocks = {}, {}, {}
local res = {1}
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  local tat = tonumber(v)
  if v and not tat then
    local a, g, b = string.match(v, '^(%d+) (%d+) (%d+)$')
    tat, given[i], blocks[i] = tonumber(a), tonumber(g), tonumber(b)
  end
  tat = tat or now
  if ARGV[3*i] == '2' and (not blocks[i] or tat <= now) then
    given[i], blocks[i] = 0, now
  end
  if tat < now then tat = now end
  tats[i] = tat
  if tat - now <= tonumber(ARGV[3*i-1]) then
    res[2*i] = 1
  else
    res[2*i] = 0
    res[1] = 0
  end
end
local m = 2*n + 1
for i = 1, n do
  local after = tats[i] - now
  if res[1] == 1 then
    after = after + tonumber(ARGV[3*i-2])
    local v = string.format('%d', now + after)
    if ARGV[3*i] == '2' then
      v = string.format('%d %d %d', now + after, given[i], blocks[i])
    end
    redis.call('SET', KEYS[i], v, 'PX', string.format('%d', math.ceil(after / 1000)))
  end
  res[2*i+1] = after
  if ARGV[3*i] == '2' then
    res[m+1], res[m+2], res[m+3] = now + after, given[i], blocks[i]
    m = m + 3
  end
end
return res
`

// refundScript gives back one request's charge in each of KEYS, ARGV
// holding four values per key: the zone's interval in microseconds and the
// request's hold (TAT after its charge, given back, block; see
// limit.giveBack), or 0 0 0 for a plain zone's charge that another slot's
// refusal undoes at once, which takes back one interval. It never takes a
// TAT below now, and a charge_on key gives nothing back once a new block
// started. It returns 0.
var refundScript = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  local interval, block = tonumber(ARGV[4*i-3]), tonumber(ARGV[4*i])
  if v then
    local tat = tonumber(v)
    local given, b
    if not tat then
      local a, g, bb = string.match(v, '^(%d+) (%d+) (%d+)$')
      tat, given, b = tonumber(a), tonumber(g), tonumber(bb)
    end
    local r = 0
    if tat and block == 0 then
      r = math.min(interval, tat - now)
    elseif b and b == block then
      r = math.min(interval, tonumber(ARGV[4*i-2]) - (given - tonumber(ARGV[4*i-1])) - now, tat - now)
    end
    if r > 0 then
      tat = tat - r
      local nv = string.format('%d', tat)
      if b then
        nv = string.format('%d %d %d', tat, given + r, b)
      end
      redis.call('SET', KEYS[i], nv, 'PX', string.format('%d', math.max(1, math.ceil((tat - now) / 1000))))
    end
  end
end
return 0
`)

// RedisStore shares zones between Caddy nodes through one Redis or Valkey.
type RedisStore struct {
	// Address is the server's host:port.
	Address string `json:"address,omitempty"`
	// Username and Password authenticate (AUTH), if set.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// DB is the database number to SELECT.
	DB int `json:"db,omitempty"`
	// KeyPrefix starts every key this store writes; default `throttle:`.
	KeyPrefix string `json:"key_prefix,omitempty"`
	// Timeout bounds each decision's round trip; default 100ms.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// OnError is what happens when Redis fails, is slow or the breaker is
	// open: `allow` (default) lets the request through, `deny` answers 503
	// with Retry-After.
	OnError OnError `json:"on_error,omitempty"`
	// TLS connects over TLS (managed Redis); default plain TCP.
	TLS *RedisTLS `json:"tls,omitempty"`
}

// errBreakerOpen is returned without asking Redis while it is failing.
var errBreakerOpen = errors.New("redis breaker open after repeated failures")

const (
	breakerThreshold = 3               // consecutive failures that open it
	breakerCooldown  = 1 * time.Second // how long it stays open before one probe
)

// redisConns are clients shared by every handler (and every config
// generation) that uses the same server, credentials and key prefix, so
// reloads keep connections.
var redisConns = caddy.NewUsagePool()

// redisConn is a lazily connected client plus its breaker: Caddy starts even
// when Redis is down, and on_error decides what requests see meanwhile.
type redisConn struct {
	opt     rueidis.ClientOption
	logger  *zap.Logger   // the first handler's
	probe   string        // key the connect probe writes (ACL check)
	timeout time.Duration // bounds the probe

	lastConnectErr lastError
	mu             sync.Mutex
	client         rueidis.Client
	dialing        *dialAttempt // the connect attempt running, if any
	closed         bool         // destructed: an attempt ending now closes its client

	failures  atomic.Int32
	openUntil atomic.Int64 // unix ns; 0 when closed
	probing   atomic.Bool
}

// dialAttempt is one connect in the background; err is set before done is
// closed.
type dialAttempt struct {
	done chan struct{}
	err  error
}

var errConnClosed = errors.New("redis client closed (config unloaded)")

func (c *redisConn) Destruct() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.client != nil {
		c.client.Close()
		c.client = nil
	}
	return nil
}

// get returns the client, connecting first if there is none. Connecting
// (dial and handshake) can take as long as rueidis's own timeouts against a
// server that accepts and never answers, so it runs in the background, one
// attempt at a time, and every caller waits for it only until ctx ends: no
// request queues behind another's connect.
func (c *redisConn) get(ctx context.Context) (rueidis.Client, error) {
	c.mu.Lock()
	if c.client != nil || c.closed {
		cl := c.client
		c.mu.Unlock()
		if cl == nil {
			return nil, errConnClosed
		}
		return cl, nil
	}
	a := c.dial()
	c.mu.Unlock()
	select {
	case <-a.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("connecting to redis: %w", ctx.Err())
	}
	if a.err != nil {
		return nil, a.err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil {
		return nil, errConnClosed
	}
	return c.client, nil
}

// dial returns the connect attempt running, starting one if none is; c.mu
// is held.
func (c *redisConn) dial() *dialAttempt {
	if c.dialing == nil {
		c.dialing = &dialAttempt{done: make(chan struct{})}
		go c.connect(c.dialing)
	}
	return c.dialing
}

// warm starts connecting ahead of the first request, which then waits only
// for what is left of the attempt.
func (c *redisConn) warm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil && !c.closed {
		c.dial()
	}
}

// connect makes one client for get; the next caller after a failure starts
// another attempt (the breaker spaces them out). A client is kept only once
// the probe ran the script: a failing attempt (refused, TLS, AUTH, NOPERM)
// is logged at error level and counted, since on_error allow would
// otherwise hide it.
func (c *redisConn) connect(a *dialAttempt) {
	cl, err := newRedisClient(c.opt)
	if err == nil {
		if err = c.runProbe(cl); err != nil {
			cl.Close()
		}
	}
	if err != nil {
		err = fmt.Errorf("connecting to redis %v: %w", c.opt.InitAddress, err)
		throttleMetrics.connectErrors.Inc()
		// Attempts repeat once a second while Redis is away: the same
		// error again goes to debug.
		level := zap.ErrorLevel
		if msg := err.Error(); msg == c.lastConnectErr.Swap(&msg) {
			level = zap.DebugLevel
		}
		c.logger.Log(level, "redis connect failed; decisions go to on_error until a connect succeeds (counted in caddy_throttle_store_connect_errors_total)", zap.Error(err))
	} else {
		c.lastConnectErr.Store(nil)
	}
	c.mu.Lock()
	switch {
	case err != nil:
	case c.closed:
		cl.Close()
		err = errConnClosed
	default:
		c.client = cl
	}
	a.err = err
	c.dialing = nil
	c.mu.Unlock()
	close(a.done)
}

// runProbe runs the GCRA script once, on a key of its own that expires in
// a millisecond, so that an ACL user lacking a permission the script needs
// is reported at connect, with the fix, rather than as each decision's
// error.
func (c *redisConn) runProbe(cl rueidis.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var reply scriptReply
	_, err := runScript(ctx, cl, []string{c.probe}, []string{"1", "0", "1"}, &reply) // interval, tolerance, charged now (so SET is tried)
	if err != nil && isNoPerm(err) {
		return fmt.Errorf("NOPERM: the ACL user lacks a permission the throttle script needs (%w): grant at least `-@all +evalsha +eval +time +get +set ~%s*`, and +cluster|slots on a cluster (see docs/throttle.md, ACL)", err, strings.SplitN(c.probe, "{", 2)[0])
	}
	return err
}

// isNoPerm reports an ACL refusal: NOPERM for a command or key, or, from
// inside a script, Redis 7.0's "can't run this command" / 7.2's "no
// permissions".
func isNoPerm(err error) bool {
	m := err.Error()
	return strings.Contains(m, "NOPERM") || strings.Contains(m, "can't run this command") || strings.Contains(m, "no permissions")
}

// lastError is the text of the last failed connect attempt's error.
type lastError struct{ p atomic.Pointer[string] }

// Swap stores msg and returns the previous text ("" if none).
func (l *lastError) Swap(msg *string) string {
	if old := l.p.Swap(msg); old != nil {
		return *old
	}
	return ""
}

func (l *lastError) Store(msg *string) { l.p.Store(msg) }

// newRedisClient runs rueidisNewClient where no request can recover a
// panic (connect's own goroutine): a panic in the client's constructor becomes
// this attempt's error, which on_error handles, never the end of the process.
func newRedisClient(opt rueidis.ClientOption) (cl rueidis.Client, err error) {
	defer func() {
		if r := recover(); r != nil {
			cl, err = nil, fmt.Errorf("throttle: redis client for %v panicked while connecting: %v", opt.InitAddress, r)
		}
	}()
	return (*rueidisNewClient.Load())(opt)
}

// rueidisNewClient is a variable so that a test can make it panic; atomic,
// as an earlier test's connect may still run in the background.
var rueidisNewClient atomic.Pointer[func(rueidis.ClientOption) (rueidis.Client, error)]

func init() {
	f := rueidis.NewClient
	rueidisNewClient.Store(&f)
}

// admit says whether to ask Redis now: always while the breaker is closed;
// once open, nothing until the cooldown ends, then a single probe.
func (c *redisConn) admit(now int64) bool {
	until := c.openUntil.Load()
	if until == 0 {
		return true
	}
	return now >= until && c.probing.CompareAndSwap(false, true)
}

// succeeded closes the breaker; it reports whether it was open.
func (c *redisConn) succeeded() (closed bool) {
	if c.failures.Load() != 0 || c.openUntil.Load() != 0 {
		c.failures.Store(0)
		closed = c.openUntil.Swap(0) != 0
		c.probing.Store(false)
	}
	return closed
}

// failed counts a failure; it reports whether this one opened the breaker
// (a failed probe keeps it open: no new opening).
func (c *redisConn) failed(now int64) (opened bool) {
	if c.failures.Add(1) >= breakerThreshold || c.probing.Load() {
		opened = c.openUntil.Swap(now+int64(breakerCooldown)) == 0
		c.probing.Store(false)
	}
	return opened
}

// isOpen reports whether the breaker is open (or half-open: waiting for a
// probe to succeed).
func (c *redisConn) isOpen() bool { return c.openUntil.Load() != 0 }

// openBreakers counts the Redis servers whose breaker is open, for the
// gauge caddy_throttle_store_breaker_open.
func openBreakers() float64 {
	n := 0
	redisConns.Range(func(_, v any) bool {
		if c, ok := v.(*redisConn); ok && c.isOpen() {
			n++
		}
		return true
	})
	return float64(n)
}

// failed records a failed decision on b's server; the one that opens the
// breaker says so at warning level, once per opening, as requests decided
// by on_error without asking Redis are logged at debug level only.
func (b *redisBackend) failed(now int64, err error) {
	if b.conn.failed(now) {
		b.logger.Warn("redis breaker opened: requests are decided by on_error without asking Redis, one probe a second, until one succeeds (gauge caddy_throttle_store_breaker_open)",
			zap.String("redis", b.address), zap.Int("consecutive_failures", breakerThreshold), zap.Duration("cooldown", breakerCooldown), zap.Error(err))
	}
}

func (b *redisBackend) succeeded() {
	if b.conn.succeeded() {
		b.logger.Info("redis breaker closed: Redis decides again", zap.String("redis", b.address))
	}
}

// redisBackend is a handler's view of a shared redisConn.
type redisBackend struct {
	logger  *zap.Logger
	address string
	poolKey string
	conn    *redisConn
	prefix  string
	// deadline bounds each decision and give-back (timeout).
	deadline sharedDeadline
	// batch sends the decisions' scripts (standalone Redis), per handler.
	batch scriptBatch
	// store is what handlers sharing a zone must agree on: the server, db
	// and key_prefix, which together say where the zone's keys live.
	store string
	// redisPlan is what requests send, set by prepare.
	redisPlan
	// holders counts who still needs conn: the handler until Cleanup, and
	// each charge_on request charged through it until it settles. A reload
	// cleans the handler up while requests are in flight; their give-backs
	// must still reach the store they were charged on, so the shared client
	// is let go of only when the last holder is done.
	holders  atomic.Int64
	released atomic.Bool // the handler's hold, given up once
}

// redisPlan is what a decision sends for each zone, in the handler's zone
// order, the same on every request (prepare): each zone's key after the
// hash tag, its script arguments (interval, tolerance, kind) and interval
// in microseconds.
type redisPlan struct {
	prefix    string
	zoneKeys  []string
	args      []string
	intervals []int64
	// refundable marks charge_on zones, whose charge may be given back.
	refundable []bool
}

// subset is the plan for the zones idx names (a request that leaves some
// zones out, on_empty_key skip).
func (p *redisPlan) subset(idx []int) *redisPlan {
	q := &redisPlan{prefix: p.prefix}
	for _, i := range idx {
		q.zoneKeys = append(q.zoneKeys, p.zoneKeys[i])
		q.args = append(q.args, p.args[3*i:3*i+3]...)
		q.intervals = append(q.intervals, p.intervals[i])
		q.refundable = append(q.refundable, p.refundable[i])
	}
	return q
}

// resolved is s with Caddy's global placeholders ({env.*}, {file.*}, ...)
// in its text fields replaced, as the documented `password
// {env.REDIS_PASSWORD}` expects. An unset or empty placeholder, or one that
// means nothing outside a request, is refused: sent literally it would turn
// into WRONGPASS or a wrong address, and with on_error allow into no limiting
// at all. Literal braces are written \{ and \}. The config itself keeps its
// placeholders (it is what the admin API shows).
func (s *RedisStore) resolved() (*RedisStore, error) {
	repl := caddy.NewReplacer()
	r := *s
	for _, f := range []struct {
		name string
		val  *string
	}{{"address", &r.Address}, {"username", &r.Username}, {"password", &r.Password}, {"key_prefix", &r.KeyPrefix}} {
		v, err := repl.ReplaceOrErr(*f.val, true, true)
		if err != nil {
			// The error names the placeholder, never the field's value
			// (a password).
			return nil, fmt.Errorf("%s: %v: only global placeholders such as {env.NAME} work here, and they must be set and not empty in Caddy's environment; write literal braces as \\{ \\}", f.name, err)
		}
		*f.val = v
	}
	return &r, nil
}

func newRedisBackend(s *RedisStore, logger *zap.Logger) (*redisBackend, error) {
	s, err := s.resolved()
	if err != nil {
		return nil, err
	}
	var tlsConfig *tls.Config
	if s.TLS != nil {
		if tlsConfig, err = s.TLS.config(); err != nil {
			return nil, err
		}
	}
	// The key prefix is part of the key: the connect probe checks that the
	// user may write the prefix's keys, so handlers with another prefix on
	// the same server get a connection (and a probe) of their own.
	key := strings.Join([]string{s.Address, s.Username, s.Password, strconv.Itoa(s.DB), s.TLS.identity(), s.KeyPrefix}, "\x00")
	v, _, err := redisConns.LoadOrNew(key, func() (caddy.Destructor, error) {
		return &redisConn{logger: logger, probe: s.KeyPrefix + "{probe}:acl", timeout: max(time.Second, 10*time.Duration(s.Timeout)), opt: rueidis.ClientOption{
			InitAddress: []string{s.Address},
			Username:    s.Username,
			Password:    s.Password,
			SelectDB:    s.DB,
			TLSConfig:   tlsConfig,
			// RESP2 servers and Valkey forks may lack client tracking; a
			// limiter never reads cached values anyway.
			DisableCache: true,
			// A decision has its own timeout and on_error policy; rueidis
			// must not retry behind its back.
			DisableRetry:     true,
			Dialer:           netDialer(time.Duration(s.Timeout)),
			ConnWriteTimeout: max(time.Second, 10*time.Duration(s.Timeout)),
		}}, nil
	})
	if err != nil {
		return nil, err
	}
	v.(*redisConn).warm()
	b := &redisBackend{
		logger:    logger,
		address:   s.Address,
		poolKey:   key,
		conn:      v.(*redisConn),
		prefix:    s.KeyPrefix,
		redisPlan: redisPlan{prefix: s.KeyPrefix},
		deadline:  sharedDeadline{timeout: time.Duration(s.Timeout)},
		store:     fmt.Sprintf("redis %s db %d key_prefix %q", s.Address, s.DB, s.KeyPrefix),
	}
	b.holders.Store(1) // the handler's
	return b, nil
}

// release gives up the handler's hold on the shared client (Cleanup);
// calling it again does nothing.
func (b *redisBackend) release() {
	if b.released.CompareAndSwap(false, true) {
		b.unhold()
	}
}

// hold keeps the shared client for a request that settles later; it
// reports false once every holder is gone (the client may be closed: that
// request's store calls fail as store errors). A true hold is ended by
// unhold.
func (b *redisBackend) hold() bool {
	for {
		n := b.holders.Load()
		if n == 0 {
			return false
		}
		if b.holders.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// unhold ends a hold; the last one lets go of the shared client (closed
// once no other handler uses it).
func (b *redisBackend) unhold() {
	if b.holders.Add(-1) == 0 {
		_, _ = redisConns.Delete(b.poolKey)
	}
}

// prepare builds what decide sends for zones, in their final order.
func (b *redisBackend) prepare(zones []*zone) {
	b.redisPlan.prefix = b.prefix
	b.zoneKeys = make([]string, len(zones))
	b.args = make([]string, 0, 3*len(zones))
	b.intervals = make([]int64, len(zones))
	b.refundable = make([]bool, len(zones))
	for i, z := range zones {
		b.intervals[i] = z.limit.interval / 1000
		b.zoneKeys[i] = "}:" + z.name + ":"
		kind := "1"
		if z.chargeOn != nil {
			kind = "2"
			b.refundable[i] = true
		}
		b.args = append(b.args,
			strconv.FormatInt(z.limit.interval/1000, 10),
			strconv.FormatInt(z.limit.tolerance/1000, 10),
			kind)
	}
}

// decide runs the GCRA script for the active zones (as prepared; one key
// each) in one round trip; holds (nil without charge_on zones) receives
// the holds of charge_on zones.
func (b *redisBackend) decide(ctx context.Context, keys []requestKey, out []outcome, holds []hold, active zoneSet) (bool, error) {
	if all := zoneSet(1<<len(keys) - 1); active&all != all {
		return b.decideSome(ctx, keys, out, holds, active)
	}
	return b.decidePlan(ctx, &b.redisPlan, keys, out, holds)
}

// decideSome decides a request that leaves some zones out: the others,
// compacted, on a plan of their own (the rare path: it allocates).
func (b *redisBackend) decideSome(ctx context.Context, keys []requestKey, out []outcome, holds []hold, active zoneSet) (bool, error) {
	var idx []int
	for i := range keys {
		if active.has(i) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return true, nil
	}
	var ks [maxZones]requestKey
	var os [maxZones]outcome
	var hs [maxZones]hold
	for k, i := range idx {
		ks[k] = keys[i]
	}
	var sub []hold
	if holds != nil {
		sub = hs[:len(idx)]
	}
	allowed, err := b.decidePlan(ctx, b.subset(idx), ks[:len(idx)], os[:len(idx)], sub)
	for k, i := range idx {
		out[i] = os[k]
		if holds != nil {
			holds[i] = hs[k]
		}
	}
	return allowed, err
}

// decidePlan is decide for the zones of plan p, keys and out in its order.
func (b *redisBackend) decidePlan(ctx context.Context, p *redisPlan, keys []requestKey, out []outcome, holds []hold) (bool, error) {
	start := time.Now()
	now := start.UnixNano()
	if !b.conn.admit(now) {
		return false, errBreakerOpen
	}
	// The request's cancellation must not reach Redis: a client that hangs
	// up is no store failure (counted, three would open the breaker for
	// everyone), and the decision is bounded by timeout alone either way.
	ctx = b.deadline.context(start)
	client, err := b.conn.get(ctx)
	if err != nil {
		b.failed(now, err)
		return false, err
	}
	var tags [maxZones]tag
	var nameBuf [maxZones]string
	names := p.names(keys, tags[:len(keys)], nameBuf[:])
	var allowed bool
	if client.Mode() == rueidis.ClientModeCluster {
		allowed, err = p.decideSlots(ctx, client, names, tags[:len(keys)], out, holds)
	} else {
		allowed, err = b.decideBatched(ctx, client, names, p.args, out, holds, p.refundable)
	}
	if err != nil {
		b.failed(time.Now().UnixNano(), err)
		return false, err
	}
	b.succeeded()
	return allowed, nil
}

// giveBack runs refundScript for the charge_on zones marked in which,
// with the same timeout and breaker as a decision: in one round trip, on a
// Redis Cluster one script per slot (as decideSlots).
func (b *redisBackend) giveBack(ctx context.Context, keys []requestKey, holds []hold, which []bool) error {
	start := time.Now()
	now := start.UnixNano()
	if !b.conn.admit(now) {
		return errBreakerOpen
	}
	ctx = b.deadline.context(start)
	client, err := b.conn.get(ctx)
	if err != nil {
		b.failed(now, err)
		return err
	}
	var tags [maxZones]tag
	var nameBuf [maxZones]string
	names := b.names(keys, tags[:len(keys)], nameBuf[:])
	cluster := client.Mode() == rueidis.ClientModeCluster
	var execs []rueidis.LuaExec
	var execTags []tag
	for i, w := range which {
		if !w {
			continue
		}
		g := 0
		if cluster {
			g = slices.Index(execTags, tags[i])
		} else if len(execs) == 0 {
			g = -1
		}
		if g < 0 {
			execs = append(execs, rueidis.LuaExec{})
			execTags = append(execTags, tags[i])
			g = len(execs) - 1
		}
		execs[g].Keys = append(execs[g].Keys, names[i])
		execs[g].Args = b.appendRefundArgs(execs[g].Args, i, &holds[i])
	}
	if err := runRefunds(ctx, client, execs); err != nil {
		b.failed(time.Now().UnixNano(), err)
		return err
	}
	b.succeeded()
	return nil
}

// appendRefundArgs appends refundScript's arguments for zone i: its
// interval and hold, or for a plain zone (h nil) a hold of zeros.
func (b *redisPlan) appendRefundArgs(args []string, i int, h *hold) []string {
	if h == nil {
		return append(args, b.args[3*i], "0", "0", "0")
	}
	return append(args, b.args[3*i], strconv.FormatInt(h.tat, 10), strconv.FormatInt(h.given, 10), strconv.FormatInt(h.block, 10))
}

// runRefunds runs refundScript once per exec and returns the first error.
func runRefunds(ctx context.Context, client rueidis.Client, execs []rueidis.LuaExec) error {
	results, err := runScripts(ctx, client, refundScript, execs)
	if err != nil {
		return err
	}
	for _, res := range results {
		if err := res.Error(); err != nil {
			return err
		}
	}
	return nil
}

// decideScript runs the GCRA script once for names, all zones of a request
// (standalone Redis) or those of one slot (cluster), atomically.
func decideScript(ctx context.Context, client rueidis.Client, names, args []string, out []outcome, holds []hold, refundable []bool) (bool, error) {
	var reply scriptReply
	res, err := runScript(ctx, client, names, args, &reply)
	if err != nil {
		return false, err
	}
	return scriptOutcomes(res, out, holds, refundable)
}

// scriptOutcomes reads the script's answer into out, one per key, and into
// holds those of the keys marked refundable (holds is nil if none is).
func scriptOutcomes(res []int64, out []outcome, holds []hold, refundable []bool) (bool, error) {
	want := 1 + 2*len(out)
	for _, r := range refundable {
		if r {
			want += 3
		}
	}
	if len(res) != want {
		return false, fmt.Errorf("redis GCRA script returned %d values, want %d", len(res), want)
	}
	for i := range out {
		out[i] = outcome{allowed: res[1+2*i] == 1, after: res[2+2*i] * 1000}
	}
	m := 1 + 2*len(out)
	for i, r := range refundable {
		if r {
			holds[i] = hold{tat: res[m], given: res[m+1], block: res[m+2]}
			m += 3
		}
	}
	return res[0] == 1, nil
}

// decideBatched is decideScript through the handler's scriptBatch (an
// EVALSHA; a server that lost the script gets it from decideScript).
func (b *redisBackend) decideBatched(ctx context.Context, client rueidis.Client, names, args []string, out []outcome, holds []hold, refundable []bool) (bool, error) {
	cmd := client.B().Evalsha().Sha1(gcraSHA1).Numkeys(int64(len(names))).Key(names...).Arg(args...).Build()
	res, err := b.batch.do(ctx, client, cmd)
	if err != nil {
		return false, err
	}
	if rerr, ok := rueidis.IsRedisErr(res.Error()); ok && rerr.IsNoScript() {
		return decideScript(ctx, client, names, args, out, holds, refundable)
	}
	var reply scriptReply
	vals, err := reply.read(res)
	if err != nil {
		return false, err
	}
	return scriptOutcomes(vals, out, holds, refundable)
}

// runScript runs the GCRA script, its answer read into reply. A command
// the client refuses to send (rueidis's cluster client panics on keys of
// different slots) is this decision's error, which on_error handles, never
// a panic.
func runScript(ctx context.Context, client rueidis.Client, names, args []string, reply *scriptReply) (res []int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			// A copy: names itself must not escape, to stay on the caller's stack.
			res, err = nil, fmt.Errorf("redis client refused the GCRA script for keys %q: %v", slices.Clone(names), r)
		}
	}()
	return reply.read(gcraScript.Exec(ctx, client, names, args))
}

// scriptReply holds the integers of the GCRA script's answer: 1 + 2 per
// zone + 3 per charge_on zone at most.
type scriptReply [1 + 5*maxZones]int64

// read is res's array of integers, in r (AsIntSlice would allocate it):
// an error if res is one, is no array, holds more than r does or anything
// but integers.
func (r *scriptReply) read(res rueidis.RedisResult) ([]int64, error) {
	msgs, err := res.ToArray()
	if err != nil {
		return nil, err
	}
	if len(msgs) > len(r) {
		return nil, fmt.Errorf("redis GCRA script returned %d values, more than %d", len(msgs), len(r))
	}
	for i := range msgs {
		if r[i], err = msgs[i].AsInt64(); err != nil {
			return nil, fmt.Errorf("redis GCRA script value %d: %w", i, err)
		}
	}
	return r[:len(msgs)], nil
}

func netDialer(timeout time.Duration) net.Dialer {
	return net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
}
