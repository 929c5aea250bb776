package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// slotsTaken is how many slots of z are taken, over all keys.
func slotsTaken(z *zone) int64 {
	n := int64(0)
	for i := range z.table.shards {
		s := &z.table.shards[i]
		s.mu.Lock()
		for _, c := range s.m {
			n += c
		}
		s.mu.Unlock()
	}
	return n
}

// holdRequests starts n requests from ip through h whose rest of the route
// blocks until release is closed, and returns once all n are inside it.
func holdRequests(t *testing.T, h *Handler, ip string, n int, release <-chan struct{}) *sync.WaitGroup {
	t.Helper()
	inside := make(chan struct{}, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			serveWith(t, h, ip, nil, func(w http.ResponseWriter, r *http.Request) error {
				inside <- struct{}{}
				<-release
				return nil
			})
		})
	}
	for range n {
		select {
		case <-inside:
		case <-time.After(10 * time.Second):
			t.Fatal("held requests did not reach the rest of the route")
		}
	}
	return &wg
}

// TestConcurrentZoneHoldsSlots: `concurrent 2` lets two requests of one
// caller be in flight, refuses the third (429, Retry-After 1, r=0, the
// policy's unit concurrent-requests) while another caller still passes,
// and frees a slot as soon as a request ends.
func TestConcurrentZoneHoldsSlots(t *testing.T) {
	h := provision(t, &Handler{Zones: []*Zone{{Name: "conn-hold", Concurrent: 2}}}, nil)
	release := make(chan struct{})
	wg := holdRequests(t, h, "192.0.2.1", 2, release)
	res := serve(t, h, "192.0.2.1", nil)
	if res.passed || res.status != 429 || res.header.Get("Retry-After") != "1" {
		t.Fatalf("third request in flight: passed %v, %d, Retry-After %q; want 429, 1", res.passed, res.status, res.header.Get("Retry-After"))
	}
	if got := stripPK(res.header.Get("RateLimit")); got != `"conn-hold";r=0` {
		t.Fatalf("RateLimit %q", got)
	}
	if got := stripPK(res.header.Get("RateLimit-Policy")); got != `"conn-hold";q=2;qu="concurrent-requests"` {
		t.Fatalf("RateLimit-Policy %q", got)
	}
	if res := serve(t, h, "192.0.2.2", nil); !res.passed || stripPK(res.header.Get("RateLimit")) != `"conn-hold";r=1` {
		t.Fatalf("another caller: passed %v, RateLimit %q; want a pass with r=1", res.passed, res.header.Get("RateLimit"))
	}
	if n := slotsTaken(h.zones[0]); n != 2 {
		t.Fatalf("%d slots taken, want 2", n)
	}
	close(release)
	wg.Wait()
	if n := slotsTaken(h.zones[0]); n != 0 {
		t.Fatalf("%d slots still taken after every request ended", n)
	}
	if n := h.zones[0].table.len(); n != 0 {
		t.Fatalf("%d keys left in the table, want 0", n)
	}
	if g := testutil.ToFloat64(h.zones[0].counters.inFlight); g != 0 {
		t.Fatalf("caddy_throttle_in_flight = %v, want 0", g)
	}
}

// TestConcurrentZoneReleasesOnEveryEnd: a slot is given back whether the
// rest of the route answers, returns an error, panics, or the client goes
// away (its context canceled, as when it hangs up).
func TestConcurrentZoneReleasesOnEveryEnd(t *testing.T) {
	h := provision(t, &Handler{Zones: []*Zone{{Name: "conn-end", Concurrent: 1}}}, nil)
	ends := map[string]caddyhttp.HandlerFunc{
		"response": func(w http.ResponseWriter, r *http.Request) error { w.WriteHeader(200); return nil },
		"error": func(http.ResponseWriter, *http.Request) error {
			return caddyhttp.Error(502, errors.New("upstream down"))
		},
		"panic": func(http.ResponseWriter, *http.Request) error { panic("handler panicked") },
		"client gone": func(w http.ResponseWriter, r *http.Request) error {
			<-r.Context().Done()
			return r.Context().Err()
		},
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://example.com/", nil)
			ctx, cancel := context.WithCancel(r.Context())
			vars := map[string]any{caddyhttp.ClientIPVarKey: "192.0.2.9"}
			r = r.WithContext(context.WithValue(ctx, caddyhttp.VarsCtxKey, vars))
			caddyhttp.NewTestReplacer(r)
			if name == "client gone" {
				cancel()
			}
			func() {
				defer func() { _ = recover() }()
				_ = h.ServeHTTP(httptest.NewRecorder(), r, end)
			}()
			cancel()
			if n := slotsTaken(h.zones[0]); n != 0 {
				t.Fatalf("after %s: %d slots taken, want 0", name, n)
			}
			if res := serve(t, h, "192.0.2.9", nil); !res.passed {
				t.Fatalf("after %s: the next request was refused (%d): the slot was not given back", name, res.status)
			}
		})
	}
}

// TestConcurrentZoneAcrossReload: a request that took a slot under one
// config gives it back after a reload replaced that config, to the zone
// the new config uses, so the caller is not locked out by a slot nobody
// holds.
func TestConcurrentZoneAcrossReload(t *testing.T) {
	ctx1, cancel1 := newContext()
	old := provisionIn(t, ctx1, &Handler{Zones: []*Zone{{Name: "conn-reload", Concurrent: 1}}}, nil)
	release := make(chan struct{})
	wg := holdRequests(t, old, "192.0.2.7", 1, release)
	ctx2, cancel2 := newContext()
	defer cancel2()
	next := provisionIn(t, ctx2, &Handler{Zones: []*Zone{{Name: "conn-reload", Concurrent: 1}}}, nil)
	_ = old.Cleanup()
	cancel1()
	if res := serve(t, next, "192.0.2.7", nil); res.passed {
		t.Fatal("new config let a second request in while the first holds the only slot")
	}
	close(release)
	wg.Wait()
	if res := serve(t, next, "192.0.2.7", nil); !res.passed {
		t.Fatalf("after the held request ended: refused (%d), its slot was not given back to the new config's zone", res.status)
	}
}

// TestConcurrentZoneWithRateZone: a request refused by the rate zone takes
// no slot (all or nothing), and the slot zone's refusal consumes no rate.
func TestConcurrentZoneWithRateZone(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := memoryHandler(t, c, &Zone{Name: "mix-rate", Rate: "2/1h"}, &Zone{Name: "mix-conn", Concurrent: 1})
	for i := range 2 {
		if !serve(t, h, "192.0.2.5", nil).passed {
			t.Fatalf("request %d refused", i+1)
		}
	}
	if res := serve(t, h, "192.0.2.5", nil); res.passed {
		t.Fatal("third request passed a 2/1h zone")
	}
	for _, z := range h.zones {
		if z.slots > 0 && slotsTaken(z) != 0 {
			t.Fatalf("a refused request holds a slot")
		}
	}
}

// TestConcurrentRefusedOnRedis: concurrent needs the memory store; on
// Redis the config is refused, saying why.
func TestConcurrentRefusedOnRedis(t *testing.T) {
	rs := testredis.Start(t)
	ctx, cancel := newContext()
	defer cancel()
	h := &Handler{Zones: []*Zone{{Name: "conn-redis", Concurrent: 5}}, Store: &Store{Type: StoreRedis, Redis: &RedisStore{Address: rs.Addr()}}}
	err := h.Provision(ctx)
	if err == nil || !strings.Contains(err.Error(), "concurrent needs store memory") || !strings.Contains(err.Error(), "leases") {
		t.Fatalf("concurrent on Redis: %v; want a refusal saying why", err)
	}
}

// TestConcurrentZoneRefusesRateSettings: a zone is one kind or the other.
func TestConcurrentZoneRefusesRateSettings(t *testing.T) {
	for _, z := range []*Zone{
		{Name: "z", Concurrent: 1, Rate: "1/s"},
		{Name: "z", Concurrent: 1, Burst: new(int64(1))},
		{Name: "z", Concurrent: 1, ChargeOn: &ChargeOn{Status: []int{401}}},
		{Name: "z", Concurrent: -1},
		{Name: "z", Concurrent: maxConcurrent + 1},
	} {
		ctx, cancel := newContext()
		err := (&Handler{Zones: []*Zone{z}}).Provision(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "concurrent") {
			t.Errorf("%+v: %v, want a refusal naming concurrent", z, err)
		}
	}
}
