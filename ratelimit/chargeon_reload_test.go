package ratelimit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// inFlight is one request through h whose origin answers only when
// released, as a slow origin does while a reload runs.
type inFlight struct {
	release chan struct{}
	done    chan struct{}
	status  int
	err     error
	panic   any
}

// startInFlight sends a request from ip through h and returns once the
// origin holds it (it was charged up front); release lets the origin
// answer status.
func startInFlight(t *testing.T, h *Handler, ip string, status int) *inFlight {
	t.Helper()
	f := &inFlight{release: make(chan struct{}), done: make(chan struct{})}
	entered := make(chan struct{})
	r := httptest.NewRequest("GET", "http://example.com/", nil)
	vars := map[string]any{caddyhttp.ClientIPVarKey: ip}
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
	caddyhttp.NewTestReplacer(r)
	w := httptest.NewRecorder()
	go func() {
		defer close(f.done)
		defer func() { f.panic = recover() }()
		f.err = h.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			close(entered)
			<-f.release
			w.WriteHeader(status)
			return nil
		}))
		f.status = w.Code
	}()
	select {
	case <-entered:
	case <-f.done:
		t.Fatalf("request never reached the origin: err %v, panic %v", f.err, f.panic)
	case <-time.After(10 * time.Second):
		t.Fatal("request did not reach the origin within 10 s")
	}
	return f
}

// finish lets the origin answer and waits for the response.
func (f *inFlight) finish(t *testing.T) {
	t.Helper()
	close(f.release)
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
		t.Fatal("response did not finish within 10 s")
	}
	if f.panic != nil {
		t.Fatalf("settling the response panicked: %v", f.panic)
	}
	if f.err != nil || f.status != http.StatusOK {
		t.Fatalf("response: %d, %v; want the origin's 200", f.status, f.err)
	}
}

// failedLoginsPassing counts how many failed logins from ip pass h (of at
// most 10): a login zone's full budget is 5.
func failedLoginsPassing(t *testing.T, h *Handler, ip string) int {
	t.Helper()
	n := 0
	for range 10 {
		res := serveNext(t, h, ip, login(false, false))
		if !res.passed {
			break
		}
		n++
	}
	return n
}

// TestChargeOnSettlesAfterReload: a charge_on request in flight while a
// reload cleans its handler up settles when its response comes, against the
// store it was charged on: no panic, and a response that does not match
// gives its charge back, whether the new config keeps the throttle or
// removes it. A Redis client is kept until the requests charged through it
// have settled, then closed.
func TestChargeOnSettlesAfterReload(t *testing.T) {
	rs := testredis.Start(t)
	const ip = "192.0.2.80"
	for _, tc := range []struct {
		name  string
		redis bool
		keep  bool // the new config has the same throttle
	}{
		{"redis/kept", true, true},
		{"redis/removed", true, false},
		{"memory/kept", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zoneName := "charge-reload-" + tc.name
			newHandler := func() *Handler {
				store := &Store{}
				if tc.redis {
					store = &Store{Type: "redis", Redis: &RedisStore{
						Address: rs.Addr(), Timeout: caddy.Duration(500 * time.Millisecond), OnError: OnErrorDeny,
						KeyPrefix: fmt.Sprintf("reload-%s-%d:", tc.name, time.Now().UnixNano()),
					}}
				}
				return &Handler{Zones: []*Zone{loginZone(zoneName)}, Store: store}
			}
			oldCfg := newHandler()
			ctx, cancel := newContext()
			old := provisionIn(t, ctx, oldCfg, nil)
			var poolKey string
			if tc.redis {
				poolKey = old.redis.poolKey
			}
			f := startInFlight(t, old, ip, http.StatusOK)

			// The reload: Caddy provisions the new config while the old
			// one runs, then cleans the old one up.
			var next *Handler
			if tc.keep {
				cfg := newHandler()
				cfg.Store = oldCfg.Store
				next = provision(t, cfg, nil)
			}
			cancel()
			if err := old.Cleanup(); err != nil {
				t.Fatal(err)
			}
			f.finish(t)

			if tc.redis {
				if n, ok := redisConns.References(poolKey); tc.keep != ok {
					t.Fatalf("after the request settled, the Redis client has %d references (held %v), want held only by the new config (%v)", n, ok, tc.keep)
				}
			}
			if next == nil {
				// Ask Redis what the caller has left, as the next config
				// that names the zone on that store would.
				cfg := newHandler()
				cfg.Store = oldCfg.Store
				next = provision(t, cfg, nil)
			}
			if got := failedLoginsPassing(t, next, ip); got != 5 {
				t.Fatalf("%d failed logins pass after the reload, want 5: the 200 in flight during the reload kept its charge", got)
			}
		})
	}
}
