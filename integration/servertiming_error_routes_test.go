package integration

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"testing"

	"github.com/caddy-edgekit/edgekit/internal/loopback"
)

// errorRouteSites: a timed site whose dead upstream's 502 goes to
// handle_errors, which proxies the hostile origin's /forge (its own
// Server-Timing entries named as the PoP's and Timing-Allow-Origin: *),
// untimed under /down/plain/ and timed by a server_timing of its own
// under /down/timed/; and a server without error routes, whose 502 is
// Caddy's bare status.
const errorRouteSites = `
https://localhost:{$HTTPS_PORT} {
	tls internal
	server_timing {
		timing_allow_origin https://app.example.com
	}
	handle /down/* {
		reverse_proxy %[2]s
	}
	respond "ok"
	handle_errors {
		handle /down/plain/* {
			rewrite * /forge
			reverse_proxy %[1]s
		}
		handle /down/timed/* {
			server_timing {
				timing_allow_origin https://errors.example.com
			}
			rewrite * /forge
			reverse_proxy %[1]s
		}
	}
}
http://{$HOST}:{$HTTP_PORT} {
	server_timing
	reverse_proxy %[2]s
}`

// TestServerTimingErrorRoutes: an error response written by handle_errors
// is the error routes', not the route's server_timing's: a reverse_proxy
// there cannot put its Timing-Allow-Origin: * and forged entries beside
// the PoP's (which would open the caller's RTT and TLS mode to any page);
// a server_timing inside handle_errors times that response, filtered as
// any other. Over HTTP/1.1, HTTP/2 and HTTP/3. Caddy's bare error status
// is untimed too (the handler cannot tell which handles an error).
func TestServerTimingErrorRoutes(t *testing.T) {
	dead := net.JoinHostPort(loopback.Claim(t), "9") // nothing listens: a 502
	c := StartCaddyWith(t, Options{}, fmt.Sprintf(errorRouteSites, hostileOrigin(t), dead))
	c.WaitHTTPS(t)
	for _, p := range hostileProtocols(c) {
		t.Run(p.name, func(t *testing.T) {
			resp, body := Get(t, p.client, c.HTTPSURL("/down/plain/x"))
			if resp.StatusCode != http.StatusOK || body != "x\n" {
				t.Fatalf("/down/plain/x: %d %q, want the error route's 200", resp.StatusCode, body)
			}
			if got := fieldsNamed(resp.Header, "Timing-Allow-Origin"); !slices.Equal(got, []string{"*"}) {
				t.Errorf("untimed error route: Timing-Allow-Origin %q, want the upstream's alone", got)
			}
			want := []string{`edge;dur=0, origin;dur=0, client;desc="h3 tls=0rtt"`, `app;desc="a, edge;dur=1", Rtt;dur=0`}
			if got := fieldsNamed(resp.Header, "Server-Timing"); !slices.Equal(got, want) {
				t.Errorf("untimed error route: Server-Timing %q, want the upstream's alone (no PoP entries beside its Timing-Allow-Origin)", got)
			}

			resp, body = Get(t, p.client, c.HTTPSURL("/down/timed/x"))
			if resp.StatusCode != http.StatusOK || body != "x\n" {
				t.Fatalf("/down/timed/x: %d %q, want the error route's 200", resp.StatusCode, body)
			}
			if got := fieldsNamed(resp.Header, "Timing-Allow-Origin"); !slices.Equal(got, []string{"https://errors.example.com"}) {
				t.Errorf("timed error route: Timing-Allow-Origin %q, want its server_timing's alone", got)
			}
			e := timingEntries(t, resp.Header) // fails on a name twice
			if want := p.name + " tls=new"; e["client"].Desc != want {
				t.Errorf("timed error route: client %q, want %q (entries %v)", e["client"].Desc, want, names(e))
			}
			if e["app"].Desc != "a, edge;dur=1" || e["edge"].Dur <= 0 || e["origin"].Dur <= 0 {
				t.Errorf("timed error route: entries %+v, want the PoP's measured ones and the upstream's app", e)
			}
		})
	}
	t.Run("bare 502", func(t *testing.T) {
		resp, _ := Get(t, c.Client(), c.URL("/x"))
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("status %d, want the dead upstream's 502", resp.StatusCode)
		}
		if hasField(resp.Header, "Server-Timing") || hasField(resp.Header, "Timing-Allow-Origin") {
			t.Errorf("the bare 502 carries timing fields: %v", resp.Header)
		}
	})
}
