package integration

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// TestThrottleChargeOnReloadInFlight: a charge_on request in flight to a
// slow origin while /load replaces the config, keeping the throttle or
// removing it, gets its response, and the charge its 200 did not earn is
// given back on the store it was charged on. (Before, on the Redis store,
// the response panicked in the give-back: the client got an empty reply
// and the charge stayed.)
func TestThrottleChargeOnReloadInFlight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		redis bool
		keep  bool
	}{
		{"redis/kept", true, true},
		{"redis/removed", true, false},
		{"memory/kept", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := "store memory"
			if tc.redis {
				store = "store redis {\n\t\t\taddress " + testredis.Start(t).Addr() + "\n\t\t\ttimeout 2s\n\t\t\ton_error deny\n\t\t}"
			}
			arrived := make(chan struct{}, 1)
			release := make(chan struct{})
			origin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/slow" {
					http.Error(w, "wrong password", http.StatusUnauthorized)
					return
				}
				arrived <- struct{}{}
				select { // a slow origin: answers once the reload is done
				case <-release:
				case <-time.After(10 * time.Second):
				}
				w.Write([]byte("slow done"))
			}))
			throttled := func(gen string) string {
				return `http://{$HOST}:{$HTTP_PORT} {
	header X-Gen ` + gen + `
	throttle {
		zone failed_logins {
			rate 5/10m
			burst 4
			charge_on status 401
		}
		` + store + `
	}
	reverse_proxy ` + origin + `
}`
			}
			unthrottled := `http://{$HOST}:{$HTTP_PORT} {
	reverse_proxy ` + origin + `
}`
			c := StartCaddy(t, throttled("1"))
			client := c.Client()

			type answer struct {
				status int
				body   string
				err    error
			}
			answered := make(chan answer, 1)
			go func() {
				resp, err := client.Get(c.URL("/slow"))
				if err != nil {
					answered <- answer{err: err}
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				answered <- answer{resp.StatusCode, string(b), err}
			}()
			select {
			case <-arrived:
			case a := <-answered:
				t.Fatalf("the slow request was answered before reaching the origin: %+v", a)
			case <-time.After(10 * time.Second):
				t.Fatal("the slow request did not reach the origin within 10 s")
			}
			next := unthrottled
			if tc.keep {
				next = throttled("2")
			}
			// /load answers once the old config was cleaned up.
			if s, body := c.Load(next); s != 200 {
				t.Fatalf("/load: %d %s", s, body)
			}
			close(release)
			var a answer
			select {
			case a = <-answered:
			case <-time.After(10 * time.Second):
				t.Fatal("the slow request was not answered within 10 s of the reload")
			}
			if a.err != nil || a.status != 200 || a.body != "slow done" {
				t.Fatalf("the request in flight during the reload: %d %q, %v; want the origin's 200", a.status, a.body, a.err)
			}
			if logs := c.Logs(); strings.Contains(logs, "panic") {
				t.Fatalf("Caddy panicked:\n%s", grepLines(logs, "panic"))
			}
			if !tc.keep {
				// Back to the throttle: the zone's keys in Redis are the
				// caller's budget.
				if s, body := c.Load(throttled("3")); s != 200 {
					t.Fatalf("/load: %d %s", s, body)
				}
			}
			// The 200 gave its charge back: the full five failures pass.
			for i := range 5 {
				if resp, body := Get(t, client, c.URL("/login")); resp.StatusCode != 401 {
					t.Fatalf("failed login %d after the reload: %d %q, want 401 (the 200 in flight kept its charge)", i+1, resp.StatusCode, body)
				}
			}
			if resp, _ := Get(t, client, c.URL("/login")); resp.StatusCode != 429 {
				t.Fatalf("sixth failed login: %d, want 429", resp.StatusCode)
			}
		})
	}
}
