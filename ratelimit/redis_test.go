package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

func redisHandler(t testing.TB, rs *testredis.Server, onError string, zones ...*Zone) *Handler {
	return provision(t, &Handler{Zones: zones, Store: &Store{Type: "redis", Redis: &RedisStore{
		Address: rs.Addr(), Timeout: caddy.Duration(500 * time.Millisecond), OnError: OnError(onError),
		KeyPrefix: fmt.Sprintf("test-%d:", time.Now().UnixNano()),
	}}}, nil)
}

func TestRedisBurstExact(t *testing.T) {
	rs := testredis.Start(t)
	h := redisHandler(t, rs, "deny", &Zone{Name: "r-burst", Rate: "10/1m", Burst: new(int64(4))})
	passed := 0
	for range 20 {
		res := serve(t, h, "192.0.2.1", nil)
		if res.passed {
			passed++
		} else if res.status != 429 || res.header.Get("Retry-After") == "" {
			t.Fatalf("rejection: status %d, Retry-After %q", res.status, res.header.Get("Retry-After"))
		}
	}
	if passed != 5 {
		t.Fatalf("%d of 20 passed, want 5 (burst 4 + 1)", passed)
	}
	if got := stripPK(serve(t, h, "2001:db8::1", nil).header.Get("RateLimit")); got != `"r-burst";r=4;t=0` {
		t.Fatalf("RateLimit for a new caller %q", got)
	}
}

func TestRedisZonesAllOrNothing(t *testing.T) {
	rs := testredis.Start(t)
	h := redisHandler(t, rs, "deny",
		&Zone{Name: "r-ip", Rate: "2/1m", Burst: new(int64(1))},
		&Zone{Name: "r-user", Key: "{http.request.header.X-User}", Rate: "3/1m", Burst: new(int64(2))},
	)
	alice := map[string]string{"X-User": "alice"}
	for range 2 {
		serve(t, h, "192.0.2.1", alice)
	}
	for range 30 {
		if serve(t, h, "192.0.2.1", alice).passed {
			t.Fatal("r-ip should reject")
		}
	}
	if !serve(t, h, "192.0.2.2", alice).passed {
		t.Fatal("r-user budget was consumed by requests r-ip rejected")
	}
	if serve(t, h, "192.0.2.3", alice).passed {
		t.Fatal("r-user should reject after 3")
	}
}

// TestRedisSharedBetweenHandlers: two handlers of separate configs (as on
// two nodes) naming one zone share one budget through Redis.
func TestRedisSharedBetweenHandlers(t *testing.T) {
	rs := testredis.Start(t)
	store := func() *Store {
		return &Store{Type: "redis", Redis: &RedisStore{Address: rs.Addr(), KeyPrefix: "shared:"}}
	}
	a := provision(t, &Handler{Zones: []*Zone{{Name: "r-shared", Rate: "10/1m", Burst: new(int64(9))}}, Store: store()}, nil)
	b := provision(t, &Handler{Zones: []*Zone{{Name: "r-shared", Rate: "10/1m", Burst: new(int64(9))}}, Store: store()}, nil)
	passed := 0
	for i := range 40 {
		h := a
		if i%2 == 1 {
			h = b
		}
		if serve(t, h, "198.51.100.7", nil).passed {
			passed++
		}
	}
	if passed != 10 {
		t.Fatalf("%d passed across two handlers, want 10", passed)
	}
}

// TestRedisOutage: with Redis gone, on_error decides; the breaker stops
// asking Redis after repeated failures; limiting resumes when it is back.
func TestRedisOutage(t *testing.T) {
	rs := testredis.Start(t)
	allow := redisHandler(t, rs, "allow", &Zone{Name: "r-out-allow", Rate: "1/1m"})
	deny := redisHandler(t, rs, "deny", &Zone{Name: "r-out-deny", Rate: "1/1m"})
	if !serve(t, allow, "192.0.2.1", nil).passed || serve(t, allow, "192.0.2.1", nil).passed {
		t.Fatal("limit not applied while Redis is up")
	}
	rs.Stop()
	for range 10 {
		if !serve(t, allow, "192.0.2.1", nil).passed {
			t.Fatal("on_error allow rejected while Redis is down")
		}
	}
	res := serve(t, deny, "192.0.2.1", nil)
	if res.passed || res.status != 503 || res.header.Get("Retry-After") != "1" {
		t.Fatalf("on_error deny: passed=%v status %d Retry-After %q, want 503 with Retry-After 1", res.passed, res.status, res.header.Get("Retry-After"))
	}
	// Both handlers share one client and breaker, now open: Redis is not
	// asked at all.
	var out [1]outcome
	_, err := allow.redis.decide(context.Background(), []requestKey{{text: "x"}}, out[:], nil, allZones)
	if !errors.Is(err, errBreakerOpen) {
		t.Fatalf("after repeated failures: %v, want the breaker open", err)
	}
	rs.Restart()
	time.Sleep(breakerCooldown + 100*time.Millisecond)
	var resumed bool
	for i := range 100 {
		// A fresh caller each try: a first request that timed out on our
		// side may still have spent its key's budget inside Redis.
		caller := fmt.Sprintf("198.18.0.%d", i+1)
		if serve(t, allow, caller, nil).passed && !serve(t, allow, caller, nil).passed {
			resumed = true
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !resumed {
		_, err := allow.redis.decide(context.Background(), []requestKey{{text: "y"}}, out[:], nil, allZones)
		t.Fatalf("limiting did not resume after Redis came back: %v", err)
	}
}

// TestRedisHungTimesOut: a Redis that accepts but never answers costs each
// decision at most the timeout, then the breaker answers at once.
func TestRedisHungTimesOut(t *testing.T) {
	rs := testredis.Start(t)
	h := redisHandler(t, rs, "allow", &Zone{Name: "r-hung", Rate: "1/1m"})
	if !serve(t, h, "192.0.2.1", nil).passed {
		t.Fatal("first request rejected")
	}
	p := rs.Cmd().Process
	_ = p.Signal(syscall.SIGSTOP)
	defer func() { _ = p.Signal(syscall.SIGCONT) }()
	var out [1]outcome
	keys := []requestKey{{text: "hung"}}
	for i := range breakerThreshold {
		_, err := h.redis.decide(context.Background(), keys, out[:], nil, allZones)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call %d to a stopped Redis: %v, want the per-call timeout", i, err)
		}
	}
	if _, err := h.redis.decide(context.Background(), keys, out[:], nil, allZones); !errors.Is(err, errBreakerOpen) {
		t.Fatalf("after %d timeouts: %v, want the breaker open", breakerThreshold, err)
	}
}
