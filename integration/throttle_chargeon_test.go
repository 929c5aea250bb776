package integration

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// chargeOnStores are the store blocks charge_on is tested with, end to end.
func chargeOnStores(t *testing.T) map[string]func() string {
	return map[string]func() string{
		"memory": func() string { return "store memory" },
		"redis": func() string {
			rs := testredis.Start(t)
			return "store redis {\n\t\t\taddress " + rs.Addr() + "\n\t\t\ton_error deny\n\t\t}"
		},
	}
}

// TestThrottleChargeOnLogin: five failed logins per ten minutes per
// address, successful logins free, an address over the limit refused up
// front, with the memory and the Redis store. Failures come both as a
// response the origin writes (401) and as an error for handle_errors (403
// from the error directive, as basic_auth returns its 401).
func TestThrottleChargeOnLogin(t *testing.T) {
	origin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Password") != "right" {
			http.Error(w, "wrong password", http.StatusUnauthorized)
			return
		}
		w.Write([]byte("welcome"))
	}))
	for name, store := range chargeOnStores(t) {
		t.Run(name, func(t *testing.T) {
			c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {
	throttle {
		zone failed_logins {
			rate 5/10m
			burst 4
			charge_on status 401 403
		}
		`+store()+`
	}
	@forbidden path /forbidden
	error @forbidden "forbidden" 403
	reverse_proxy `+origin+`
	handle_errors {
		respond "error {err.status_code}" {err.status_code}
	}
}`)
			client := c.Client()
			try := func(path, password string) (int, string) {
				resp, body := Get(t, client, c.URL(path), "X-Password", password)
				return resp.StatusCode, body
			}
			for i := range 20 {
				if s, body := try("/login", "right"); s != 200 || body != "welcome" {
					t.Fatalf("successful login %d: %d %q, want 200 (successes are free)", i+1, s, body)
				}
			}
			for i, path := range []string{"/login", "/forbidden", "/login", "/forbidden", "/login"} {
				want := map[string]int{"/login": 401, "/forbidden": 403}[path]
				if s, body := try(path, "wrong"); s != want {
					t.Fatalf("failure %d (%s): %d %q, want %d", i+1, path, s, body, want)
				}
			}
			for i, password := range []string{"wrong", "right", "right"} {
				if s, body := try("/login", password); s != 429 || body != "error 429" {
					t.Fatalf("attempt %d after 5 failures (password %s): %d %q, want 429 up front", i+1, password, s, body)
				}
			}
			m := c.Metrics()
			for _, want := range []string{
				`caddy_throttle_requests_total{decision="charged",zone="failed_logins"} 5`,
				`caddy_throttle_requests_total{decision="rejected",zone="failed_logins"} 3`,
			} {
				if !strings.Contains(m, want) {
					t.Fatalf("metrics lack %s:\n%s", want, grepLines(m, "caddy_throttle"))
				}
			}
		})
	}
}

// TestThrottleChargeOnInFlight: the documented bound under concurrency. A
// check sees only charges that have landed, and a charge lands when the
// response's status is known. G = 8 failing logins from one address reach
// the origin together (it holds each until all 8 have arrived), all pass
// although the limit is 5, and every later one is refused: at most the
// limit plus the requests in flight at once (L + G - 1 = 12) pass.
func TestThrottleChargeOnInFlight(t *testing.T) {
	const G, L = 8, 5
	for name, store := range chargeOnStores(t) {
		t.Run(name, func(t *testing.T) {
			var arrived atomic.Int64
			release := make(chan struct{})
			var once sync.Once
			origin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if arrived.Add(1) == G {
					once.Do(func() { close(release) })
				}
				select {
				case <-release:
				case <-time.After(10 * time.Second):
				}
				http.Error(w, "wrong password", http.StatusUnauthorized)
			}))
			c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {
	throttle {
		zone failed_logins {
			rate 5/10m
			burst 4
			charge_on status 401
		}
		`+store()+`
	}
	reverse_proxy `+origin+`
}`)
			client := c.Client()
			var statuses sync.Map
			var wg sync.WaitGroup
			for g := range G {
				wg.Go(func() {
					resp, _ := Get(t, client, c.URL("/login"))
					statuses.Store(g, resp.StatusCode)
				})
			}
			wg.Wait()
			passed := 0
			statuses.Range(func(_, v any) bool {
				if v.(int) == 401 {
					passed++
				} else {
					t.Errorf("held request: %d, want 401", v.(int))
				}
				return true
			})
			if passed != G || arrived.Load() != G {
				t.Fatalf("%d of %d concurrent failing logins passed (origin saw %d), want all: none was charged while they were in flight", passed, G, arrived.Load())
			}
			// All 8 landed: every later attempt is refused, and the caller
			// pays for all 8: the wait is the 2 minutes a 5th failure costs
			// plus 2 for each of the 3 beyond it.
			for i := range 5 {
				resp, _ := Get(t, client, c.URL("/login"))
				if resp.StatusCode != 429 {
					t.Fatalf("attempt %d after %d failures: %d, want 429", i+1, G, resp.StatusCode)
				}
				if ra := resp.Header.Get("Retry-After"); ra != "480" && ra != "479" {
					t.Fatalf("Retry-After %q, want 480 (the 3 failures beyond the limit charged too)", ra)
				}
			}
			if n := arrived.Load(); n != G || n > L+G-1 {
				t.Fatalf("origin saw %d failing logins, want %d (bound %d)", n, G, L+G-1)
			}
		})
	}
}
