package ratelimit

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// TestRedisCanceledRequestIsNoFailure: a request whose client went away
// (its context canceled) is still decided, within the timeout, and never
// counts against the breaker every handler of that Redis shares.
func TestRedisCanceledRequestIsNoFailure(t *testing.T) {
	rs := testredis.Start(t)
	h := redisHandler(t, rs, "deny", &Zone{Name: "r-canceled", Rate: "1/1h"})
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	var out [1]outcome
	keys := []requestKey{{text: "gone"}}
	for i := range 2 * breakerThreshold {
		allowed, err := h.redis.decide(gone, keys, out[:], nil, allZones)
		if err != nil {
			t.Fatalf("decision %d for a client that hung up: %v, want one made regardless", i, err)
		}
		if allowed != (i == 0) {
			t.Fatalf("decision %d: allowed=%v, want only the first (rate 1/1h)", i, allowed)
		}
	}
	if f := h.redis.conn.failures.Load(); f != 0 {
		t.Fatalf("%d failures counted for clients that hung up", f)
	}
}

// TestRedisPlaceholders: Caddy's global placeholders in address, username,
// password and key_prefix are expanded at provision; an unset or unknown
// one is refused, naming the field.
func TestRedisPlaceholders(t *testing.T) {
	rs := testredis.Start(t)
	t.Setenv("EDGEKIT_T_ADDR", rs.Addr())
	t.Setenv("EDGEKIT_T_USER", "default")
	t.Setenv("EDGEKIT_T_PASS", "pw")
	t.Setenv("EDGEKIT_T_PREFIX", "pfx")
	h := provision(t, &Handler{
		Zones: []*Zone{{Name: "r-ph", Rate: "1/1h"}},
		Store: &Store{Type: "redis", Redis: &RedisStore{
			Address:   "{env.EDGEKIT_T_ADDR}",
			Username:  "{env.EDGEKIT_T_USER}",
			Password:  "{env.EDGEKIT_T_PASS}",
			KeyPrefix: "{env.EDGEKIT_T_PREFIX}:",
		}},
	}, nil)
	opt := h.redis.conn.opt
	if opt.InitAddress[0] != rs.Addr() || opt.Username != "default" || opt.Password != "pw" || h.redis.prefix != "pfx:" {
		t.Fatalf("expanded to address %q username %q password %q key_prefix %q", opt.InitAddress, opt.Username, opt.Password, h.redis.prefix)
	}
	// The config as written keeps its placeholders: it is what the admin
	// API shows, and must not turn into the secret.
	if h.Store.Redis.Password != "{env.EDGEKIT_T_PASS}" {
		t.Fatalf("config's password rewritten to %q", h.Store.Redis.Password)
	}
	for _, field := range []string{"address", "username", "password", "key_prefix"} {
		for _, ph := range []string{"{env.EDGEKIT_T_UNSET}", "{nope}"} {
			s := &RedisStore{Address: rs.Addr()}
			switch field {
			case "address":
				s.Address = ph
			case "username":
				s.Username = ph
			case "password":
				s.Password = "x" + ph
			case "key_prefix":
				s.KeyPrefix = ph
			}
			ctx, cancel := newContext()
			h := &Handler{Zones: []*Zone{{Name: "r-ph-bad", Rate: "1/1h"}}, Store: &Store{Type: "redis", Redis: s}}
			err := h.Provision(ctx)
			_ = h.Cleanup()
			cancel()
			if err == nil || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), ph) {
				t.Fatalf("%s %s: %v, want a refusal naming the field and placeholder", field, ph, err)
			}
		}
	}
	// Escaped braces are literal.
	h = provision(t, &Handler{
		Zones: []*Zone{{Name: "r-ph-esc", Rate: "1/1h"}},
		Store: &Store{Type: "redis", Redis: &RedisStore{Address: rs.Addr(), Password: `a\{b\}`}},
	}, nil)
	if got := h.redis.conn.opt.Password; got != "a{b}" {
		t.Fatalf(`password a\{b\}: %q, want a{b}`, got)
	}
}

// TestRedisHungConnectConcurrent: against a server that accepts and never
// answers, concurrent decisions while the client connects each take about
// the timeout, not a turn each behind one connect attempt after another.
func TestRedisHungConnectConcurrent(t *testing.T) {
	addr := testredis.Hung(t, "127.0.0.1:0")
	const timeout = 100 * time.Millisecond
	h := provision(t, &Handler{
		Zones: []*Zone{{Name: "r-hung-connect", Rate: "1/1h"}},
		Store: &Store{Type: "redis", Redis: &RedisStore{Address: addr, Timeout: caddy.Duration(timeout), OnError: "deny"}},
	}, nil)
	slowest := slowestOfConcurrentDecisions(t, h, 30)
	t.Logf("slowest of 30 concurrent decisions: %v (timeout %v)", slowest, timeout)
	if slowest > timeout+400*time.Millisecond {
		t.Fatalf("slowest of 30 concurrent decisions took %v with timeout %v", slowest, timeout)
	}
}

// TestRedisZoneStoreMismatch: two handlers of one config naming one Redis
// zone must agree on db and key_prefix; otherwise they would silently keep
// two budgets under one name.
func TestRedisZoneStoreMismatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    RedisStore
		ok   bool
	}{
		{"same", RedisStore{Address: "127.0.0.1:1", DB: 1, KeyPrefix: "p:"}, true},
		{"db", RedisStore{Address: "127.0.0.1:1", DB: 2, KeyPrefix: "p:"}, false},
		{"key_prefix", RedisStore{Address: "127.0.0.1:1", DB: 1, KeyPrefix: "q:"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := newContext()
			defer cancel()
			zone := "r-mismatch-" + tc.name
			provisionIn(t, ctx, &Handler{
				Zones: []*Zone{{Name: zone, Rate: "1/1h"}},
				Store: &Store{Type: "redis", Redis: &RedisStore{Address: "127.0.0.1:1", DB: 1, KeyPrefix: "p:"}},
			}, nil)
			b := tc.b
			h := &Handler{Zones: []*Zone{{Name: zone, Rate: "1/1h"}}, Store: &Store{Type: "redis", Redis: &b}}
			err := h.Provision(ctx)
			_ = h.Cleanup()
			if tc.ok && err != nil {
				t.Fatalf("same store: %v", err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "defined twice differently")) {
				t.Fatalf("zone %s with another %s: %v, want it refused", zone, tc.name, err)
			}
		})
	}
}

// TestRedisHungAfterConnect: once connected, a Redis that stops answering
// (stopped, or replaced by one that accepts and never answers, so that the
// client has to reconnect) still costs each of 30 concurrent decisions
// about the timeout.
func TestRedisHungAfterConnect(t *testing.T) {
	for _, state := range []string{"stopped", "reconnect"} {
		t.Run(state, func(t *testing.T) {
			rs := testredis.Start(t)
			const timeout = 100 * time.Millisecond
			h := provision(t, &Handler{
				Zones: []*Zone{{Name: "r-hung-" + state, Rate: "1000/1s"}},
				Store: &Store{Type: "redis", Redis: &RedisStore{Address: rs.Addr(), Timeout: caddy.Duration(timeout), OnError: "deny"}},
			}, nil)
			// Connected first: on a loaded machine (or under -race) the
			// connect may take longer than one decision's timeout.
			var out [1]outcome
			var err error
			for range 50 {
				if _, err = h.redis.decide(context.Background(), []requestKey{{text: "k"}}, out[:], nil, allZones); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("Redis up: %v", err)
			}
			switch state {
			case "stopped":
				p := rs.Cmd().Process
				_ = p.Signal(syscall.SIGSTOP)
				t.Cleanup(func() { _ = p.Signal(syscall.SIGCONT) })
			case "reconnect":
				rs.Stop()
				testredis.Hung(t, rs.Addr())
			}
			slowest := slowestOfConcurrentDecisions(t, h, 30)
			t.Logf("%s: slowest of 30 concurrent decisions: %v (timeout %v)", state, slowest, timeout)
			if slowest > timeout+400*time.Millisecond {
				t.Fatalf("%s: slowest of 30 concurrent decisions took %v with timeout %v", state, slowest, timeout)
			}
		})
	}
}

// slowestOfConcurrentDecisions makes n decisions at once against a Redis
// that never answers, and returns the longest any of them took; each must
// fail (on_error applies), none may be decided.
func slowestOfConcurrentDecisions(t *testing.T, h *Handler, n int) time.Duration {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	for range n {
		wg.Go(func() {
			var out [1]outcome
			start := time.Now()
			_, err := h.redis.decide(context.Background(), []requestKey{{text: "k"}}, out[:], nil, allZones)
			took := time.Since(start)
			mu.Lock()
			slowest = max(slowest, took)
			mu.Unlock()
			if err == nil {
				t.Error("a server that never answers decided a request")
			}
		})
	}
	wg.Wait()
	return slowest
}

// TestRedisKeyPrefixHashTagRefused: a key_prefix holding a brace, written
// as an escape, or given by a placeholder's value, is refused at start
// (JSON as the Caddyfile): on a Redis Cluster it would take over the hash
// tag, put zones in different slots and turn limiting off under on_error
// allow. No Redis is asked.
func TestRedisKeyPrefixHashTagRefused(t *testing.T) {
	t.Setenv("EDGEKIT_T_TAGGED", "pop{1}:")
	t.Setenv("EDGEKIT_T_PLAIN", "pop1:")
	for prefix, refused := range map[string]bool{
		`edge\{pop\}:`:           true,
		`edge\}:`:                true,
		"{env.EDGEKIT_T_TAGGED}": true,
		"{env.EDGEKIT_T_PLAIN}":  false,
		"edge:pop-1:":            false,
	} {
		h := &Handler{Zones: []*Zone{{Name: "r-prefix", Rate: "1/1h"}}, Store: &Store{Type: "redis", Redis: &RedisStore{Address: "127.0.0.1:1", KeyPrefix: prefix}}}
		ctx, cancel := newContext()
		err := h.Provision(ctx)
		_ = h.Cleanup()
		cancel()
		if got := err != nil && strings.Contains(err.Error(), "key_prefix") && strings.Contains(err.Error(), "hash tag"); got != refused {
			t.Errorf("key_prefix %q: %v; want refused %v", prefix, err, refused)
		}
	}
}
