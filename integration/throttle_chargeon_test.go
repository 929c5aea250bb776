package integration

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// chargeOnStores are the store blocks charge_on is tested with, end to end.
// Each starts what it needs on the subtest's own t, so a missing
// redis-server skips that subtest alone.
func chargeOnStores() map[string]func(t *testing.T) string {
	redis := func(addr string) string {
		return "store redis {\n\t\t\taddress " + addr + "\n\t\t\ttimeout 2s\n\t\t\ton_error deny\n\t\t}"
	}
	return map[string]func(t *testing.T) string{
		"memory":  func(*testing.T) string { return "store memory" },
		"redis":   func(t *testing.T) string { return redis(testredis.Start(t).Addr()) },
		"cluster": func(t *testing.T) string { return redis(testredis.StartCluster(t, 3).Nodes[0].Addr()) },
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
	for name, store := range chargeOnStores() {
		t.Run(name, func(t *testing.T) {
			c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {
	throttle {
		zone failed_logins {
			rate 5/10m
			burst 4
			charge_on status 401 403
		}
		`+store(t)+`
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

// TestThrottleChargeOnInFlight: charge_on holds under concurrency. With
// `rate 5/10m burst 4 charge_on status 401` (L = 5), 40 wrong passwords
// from one address at once against a slow login: each is charged up front,
// so L reach the login (held there until the other 35 have been answered)
// and get 401, and the other 35 get 429 while those are in flight. (Before,
// all 40 reached the login and got 401: a check saw only charges that had
// landed.)
func TestThrottleChargeOnInFlight(t *testing.T) {
	const N, L = 40, 5
	for name, store := range chargeOnStores() {
		t.Run(name, func(t *testing.T) {
			var arrived, refused atomic.Int64
			release := make(chan struct{})
			var once sync.Once
			origin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrived.Add(1)
				select { // a slow login: answers once the others are
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
		`+store(t)+`
	}
	reverse_proxy `+origin+`
}`)
			client := c.Client()
			statuses := make([]int, N)
			errs := make([]error, N)
			var wg sync.WaitGroup
			for i := range N {
				wg.Go(func() {
					resp, err := client.Get(c.URL("/login"))
					if err != nil {
						errs[i] = err
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					statuses[i] = resp.StatusCode
					if resp.StatusCode == 429 && refused.Add(1) == N-L {
						once.Do(func() { close(release) })
					}
				})
			}
			wg.Wait()
			once.Do(func() { close(release) })
			count := map[int]int{}
			for i, s := range statuses {
				if errs[i] != nil {
					t.Fatalf("request %d: %v", i, errs[i])
				}
				count[s]++
			}
			if count[401] != L || count[429] != N-L || arrived.Load() != L {
				t.Fatalf("%d concurrent wrong passwords: %v, the login saw %d; want %d x 401 (the limit, however many at once) and %d x 429", N, count, arrived.Load(), L, N-L)
			}
			// The five kept their charge: the next attempt waits for the
			// oldest to be used up, 2 minutes.
			resp, _ := Get(t, client, c.URL("/login"))
			if ra := resp.Header.Get("Retry-After"); resp.StatusCode != 429 || (ra != "120" && ra != "119") {
				t.Fatalf("attempt after the %d failures: %d, Retry-After %q; want 429, 120", L, resp.StatusCode, ra)
			}
			if n := arrived.Load(); n != L {
				t.Fatalf("the login saw %d attempts, want %d", n, L)
			}
		})
	}
}

// TestThrottleKeySecretsNotWritten: a zone keyed by a credential
// (Authorization) writes neither into Caddy's log (observe mode's
// would-reject line shows the partition key, the pk of RateLimit), nor into
// metrics, nor into the names of Redis keys (the key's SHA-256). (Before,
// the log line carried "key":"Bearer sk_live_..." and the Redis name
// "=Bearer sk_live_...".)
func TestThrottleKeySecretsNotWritten(t *testing.T) {
	const secret = "sk_live_51HqLyjWDarjtT1zdp7dc"
	origin := EchoOrigin(t)
	for _, name := range []string{"memory", "redis"} {
		t.Run(name, func(t *testing.T) {
			store := "store memory"
			var rs *testredis.Server
			if name == "redis" {
				rs = testredis.Start(t)
				store = "store redis {\n\t\t\taddress " + rs.Addr() + "\n\t\t\ton_error deny\n\t\t}"
			}
			c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {
	throttle {
		zone per_token {
			key {http.request.header.Authorization}
			rate 1/1m
		}
		`+store+`
		mode observe
	}
	reverse_proxy `+origin+`
}`)
			var pk string
			for i := range 3 {
				resp, _ := Get(t, c.Client(), c.URL("/"), "Authorization", "Bearer "+secret)
				if resp.StatusCode != 200 {
					t.Fatalf("request %d: %d", i+1, resp.StatusCode)
				}
				field := resp.Header.Get("RateLimit")
				_, after, ok := strings.Cut(field, ";pk=:")
				if !ok {
					t.Fatalf("RateLimit %q has no pk", field)
				}
				pk, _, _ = strings.Cut(after, ":")
			}
			logs := c.Logs()
			if n := strings.Count(logs, "would reject (observe mode)"); n != 2 {
				t.Fatalf("%d would-reject lines, want 2:\n%s", n, logs)
			}
			if strings.Contains(logs, secret) {
				t.Fatalf("Caddy's log holds the key:\n%s", grepLines(logs, secret))
			}
			if !strings.Contains(logs, `"pk":"`+pk+`"`) {
				t.Fatalf("would-reject line lacks the partition key %q:\n%s", pk, grepLines(logs, "would reject"))
			}
			if m := c.Metrics(); strings.Contains(m, secret) {
				t.Fatalf("metrics hold the key:\n%s", grepLines(m, secret))
			}
			if rs == nil {
				return
			}
			keys := testredis.Command(t, rs.Addr(), "KEYS", "*")
			if strings.Contains(keys, secret) || strings.Contains(keys, "Bearer") {
				t.Fatalf("Redis key names hold the key: %s", keys)
			}
			if !strings.Contains(keys, "throttle:{") || !strings.Contains(keys, ":per_token:#") {
				t.Fatalf("Redis keys %q: want the zone's key, named by its hash", keys)
			}
			scan := testredis.Command(t, rs.Addr(), "SCAN", "0", "MATCH", "*", "COUNT", "1000")
			if strings.Contains(scan, secret) {
				t.Fatalf("SCAN shows the key: %s", scan)
			}
		})
	}
}
