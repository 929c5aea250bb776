package integration

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/loopback"
)

// TestReverseProxyOverEveryProtocol proves the harness itself: a real Caddy
// proxies to a real origin over HTTP/1.1, HTTP/2 and HTTP/3, and a bad
// reload is refused while the old config keeps serving.
func TestReverseProxyOverEveryProtocol(t *testing.T) {
	origin := EchoOrigin(t)
	c := StartCaddy(t, `
http://{$HOST}:{$HTTP_PORT} {
	reverse_proxy `+origin+`
}
https://localhost:{$HTTPS_PORT} {
	tls internal
	reverse_proxy `+origin+`
}`)
	c.WaitHTTPS(t)

	for _, tc := range []struct {
		name   string
		client *http.Client
		url    string
		proto  string
	}{
		{"h1", c.Client(), c.URL("/plain?q=1"), "HTTP/1.1"},
		{"h2", c.Client(), c.HTTPSURL("/tls?q=2"), "HTTP/2.0"},
		{"h3", c.H3Client(), c.HTTPSURL("/quic?q=3"), "HTTP/3.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, tc.url, nil)
			echo, proto := GetEcho(t, tc.client, req)
			if proto != tc.proto {
				t.Fatalf("client spoke %s, want %s", proto, tc.proto)
			}
			if !strings.HasPrefix(echo.URI, req.URL.Path) {
				t.Errorf("origin saw URI %q, want %q", echo.URI, req.URL.RequestURI())
			}
		})
	}

	status, body := c.Load(`http://{$HOST}:{$HTTP_PORT} {
	no_such_directive
}`)
	if status == http.StatusOK || !strings.Contains(body, "no_such_directive") {
		t.Fatalf("bad reload: status %d body %q; want a refusal naming the directive", status, body)
	}
	req, _ := http.NewRequest(http.MethodGet, c.URL("/after-bad-reload"), nil)
	if echo, _ := GetEcho(t, c.Client(), req); echo.URI != "/after-bad-reload" {
		t.Fatalf("old config no longer serving: origin saw %q", echo.URI)
	}
}

// harnessSites answers name on every listener, so a response says which
// Caddy served it.
func harnessSites(name string) string {
	return `http://{$HOST}:{$HTTP_PORT} {
	respond "` + name + `"
}
https://localhost:{$HTTPS_PORT} {
	tls internal
	respond "` + name + `"
}`
}

// harnessAnswer sends one request to url on a fresh connection (the kernel
// spreads connections, not requests, over SO_REUSEPORT listeners) and
// returns the body.
func harnessAnswer(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Close = true
	resp, body := Do(t, client, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d %q", url, resp.StatusCode, body)
	}
	return body
}

// TestHarnessOwnAddress: two Caddys started with the same port numbers
// (HTTP, HTTPS with HTTP/3, admin) on two claimed loopback addresses each
// get only their own traffic, on every listener. The control shows what the
// harness prevents: two Caddys on one address and the same ports both start
// (SO_REUSEPORT) and silently share the connections.
func TestHarnessOwnAddress(t *testing.T) {
	t.Run("own addresses", func(t *testing.T) {
		hostA, hostB := loopback.Claim(t), loopback.Claim(t)
		p := freePorts(t, hostA)
		same := func() ports { return p }
		a := startCaddyOn(t, Options{}, hostA, same, harnessSites("a"))
		b := startCaddyOn(t, Options{}, hostB, same, harnessSites("b"))
		if a.HTTPPort != b.HTTPPort || a.HTTPSPort != b.HTTPSPort || a.AdminPort != b.AdminPort || a.Host == b.Host {
			t.Fatalf("not the set-up under test: a %s %d %d %d, b %s %d %d %d", a.Host, a.HTTPPort, a.HTTPSPort, a.AdminPort, b.Host, b.HTTPPort, b.HTTPSPort, b.AdminPort)
		}
		a.WaitHTTPS(t)
		b.WaitHTTPS(t)
		for _, c := range []struct {
			name  string
			caddy *Caddy
		}{{"a", a}, {"b", b}} {
			h1h2 := c.caddy.Client()
			for _, l := range []struct {
				proto  string
				client func() *http.Client // for each request
				url    string
				n      int
			}{
				{"h1", func() *http.Client { return h1h2 }, c.caddy.URL("/"), 40},
				{"h2", func() *http.Client { return h1h2 }, c.caddy.HTTPSURL("/"), 40},
				// A fresh client per request: a new UDP socket, so a new
				// 4-tuple each time; fewer, as that is slow under -race.
				{"h3", c.caddy.H3Client, c.caddy.HTTPSURL("/"), 10},
			} {
				seen := map[string]int{}
				for range l.n {
					seen[harnessAnswer(t, l.client(), l.url)]++
				}
				if seen[c.name] != l.n {
					t.Errorf("%s over %s to %s: answers %v, want all %d from %s", c.name, l.proto, c.caddy.Host, seen, l.n, c.name)
				}
			}
			resp, body := Get(t, http.DefaultClient, c.caddy.AdminURL("/config/apps/http/servers"))
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"body":"`+c.name+`"`) {
				t.Errorf("admin of %s: %d %.200s, want its own config", c.name, resp.StatusCode, body)
			}
			// The harness holds the address's claim while Caddy runs.
			if l, err := net.Listen("tcp4", net.JoinHostPort(c.caddy.Host, strconv.Itoa(loopback.ClaimPort))); err == nil {
				l.Close()
				t.Errorf("%s's address %s is not claimed", c.name, c.caddy.Host)
			}
		}
	})

	t.Run("control: one address, same ports", func(t *testing.T) {
		// 127.0.0.1 unclaimed and ports probed on every interface: what the
		// harness did before each Caddy had an address of its own.
		p := ports{FreePort(t), FreePort(t), FreePort(t)}
		for range 100 { // distinct, or a's own admin answers its site
			if p.http != p.https && p.https != p.admin && p.http != p.admin {
				break
			}
			p = ports{FreePort(t), FreePort(t), FreePort(t)}
		}
		same := func() ports { return p }
		a := startCaddyOn(t, Options{}, "127.0.0.1", same, harnessSites("a"))
		b := startCaddyOn(t, Options{}, "127.0.0.1", same, harnessSites("b"))
		// b's readiness check may have been answered by a (they share the
		// admin port too): wait for b's own word that it serves.
		if !WaitFor(t.Context(), 30*time.Second, func() bool { return strings.Contains(b.Logs(), `"server running"`) }) {
			t.Fatalf("b never said it serves:\n%s", b.Logs())
		}
		seen := map[string]int{}
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && (seen["a"] == 0 || seen["b"] == 0); {
			seen[harnessAnswer(t, a.Client(), a.URL("/"))]++
		}
		if seen["a"] == 0 || seen["b"] == 0 {
			t.Fatalf("two Caddys on %s port %d: answers %v; the control expects both to answer (SO_REUSEPORT shares the port)", a.Host, p.http, seen)
		}
		t.Logf("two Caddys on one address and port %d shared its connections: %v", p.http, seen)
	})
}
