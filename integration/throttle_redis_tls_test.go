package integration

import (
	"strings"
	"testing"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// TestThrottleRedisTLS: a built Caddy limits through TLS-only redis-servers
// (--port 0) with a CA the test made: server-verified TLS, then mutual TLS.
// A wrong CA fails at first use, clearly (an error-level line naming the
// verification failure) and counted, and on_error deny shows it as 503.
func TestThrottleRedisTLS(t *testing.T) {
	ca := testredis.NewCA(t, "e2e")
	plain := testredis.StartTLS(t, ca, false)
	mutual := testredis.StartTLS(t, ca, true)
	cert, key := ca.Issue("caddy-client", "")
	wrong := testredis.NewCA(t, "wrong")
	route := func(path, zone, addr, tls string) string {
		return `
	handle ` + path + ` {
		throttle {
			zone ` + zone + ` {
				rate 2/1h
				burst 1
			}
			store redis {
				address ` + addr + `
				timeout 2s
				on_error deny
				tls {
					` + tls + `
				}
			}
		}
		respond "ok"
	}`
	}
	c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {`+
		route("/tls", "tls_plain", plain.Addr(), "ca "+ca.File)+
		route("/mtls", "tls_mutual", mutual.Addr(), "ca "+ca.File+"\n\t\t\t\t\tcert "+cert+"\n\t\t\t\t\tkey "+key)+
		route("/wrong", "tls_wrong", plain.Addr(), "ca "+wrong.File)+`
}`)
	client := c.Client()
	for _, path := range []string{"/tls", "/mtls"} {
		for i, want := range []int{200, 200, 429, 429} {
			if resp, body := Get(t, client, c.URL(path)); resp.StatusCode != want {
				t.Fatalf("%s request %d: %d %q, want %d\n%s", path, i, resp.StatusCode, body, want, grepLines(c.Logs(), "redis"))
			}
		}
	}
	if resp, _ := Get(t, client, c.URL("/wrong")); resp.StatusCode != 503 {
		t.Fatalf("/wrong (a CA that did not sign the server's certificate): %d, want 503 (on_error deny)", resp.StatusCode)
	}
	failed := grepLines(c.Logs(), "redis connect failed")
	if !strings.Contains(failed, "certificate signed by unknown authority") || !strings.Contains(strings.ToLower(failed), "error") {
		t.Fatalf("wrong CA not reported at error level with its cause:\n%s", failed)
	}
	m := c.Metrics()
	for _, metric := range []string{"caddy_throttle_store_connect_errors_total ", "caddy_throttle_store_errors_total "} {
		if !strings.Contains(m, metric) || strings.Contains(m, metric+"0\n") {
			t.Fatalf("%snot counted:\n%s", metric, grepLines(m, "caddy_throttle_store"))
		}
	}
}
