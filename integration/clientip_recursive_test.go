package integration

import (
	"net/http"
	"strings"
	"testing"
)

// TestClientIPRecursiveAgainstNginxAndCaddy sends the same requests, from
// the same peer (127.0.0.1, the CDN here) with the same trusted ranges
// (the CDN and a load balancer of variable depth in 10/8), to client_ip
// with recursive, to Caddy's own trusted_proxies_strict and to nginx's
// real_ip_recursive. On well-formed chains all three answer the same
// client; where the chain holds something that cannot be read before the
// client, or no address outside the ranges, client_ip believes nothing
// (the peer) while Caddy skips what it cannot read and nginx answers an
// address of the operator's own balancer.
func TestClientIPRecursiveAgainstNginxAndCaddy(t *testing.T) {
	const ranges = "127.0.0.1/32 10.0.0.0/8 2001:db8:e::/48"
	// nginx first: without it the test skips before starting any Caddy.
	nginx := StartNginx(t, "", `
		set_real_ip_from 127.0.0.1/32;
		set_real_ip_from 10.0.0.0/8;
		set_real_ip_from 2001:db8:e::/48;
		real_ip_header X-Forwarded-For;
		real_ip_recursive on;
		location / { return 200 "$remote_addr"; }`)
	edgekit := StartCaddy(t, `
http://{$HOST}:{$HTTP_PORT} {
	handle /hops1 {
		client_ip {
			trusted_proxies `+ranges+`
			hops 1
		}
		header X-Reason {http.client_ip.reason}
		respond "{client_ip}"
	}
	handle /hops2 {
		client_ip {
			trusted_proxies `+ranges+`
			hops 2
		}
		header X-Reason {http.client_ip.reason}
		respond "{client_ip}"
	}
	handle {
		client_ip {
			trusted_proxies `+ranges+`
			recursive
		}
		header X-Reason {http.client_ip.reason}
		respond "{client_ip}"
	}
}`)
	caddyStrict := StartCaddyWith(t, Options{Global: `servers {
		trusted_proxies static ` + ranges + `
		trusted_proxies_strict
		client_ip_headers X-Forwarded-For
	}`}, `
http://{$HOST}:{$HTTP_PORT} {
	respond "{client_ip}"
}`)

	for _, tc := range []struct {
		name                  string
		xff                   []string // header lines
		edgekit, caddy, nginx string
		reason                string // client_ip's
	}{
		// The deployment: CDN, then a balancer of variable depth.
		{"through the balancer", []string{"203.0.113.7, 10.1.1.1"}, "203.0.113.7", "203.0.113.7", "203.0.113.7", "xff"},
		{"straight from the CDN", []string{"203.0.113.7"}, "203.0.113.7", "203.0.113.7", "203.0.113.7", "xff"},
		{"two balancer layers", []string{"6.6.6.6, 203.0.113.7, 10.3.3.3, 10.1.1.1"}, "203.0.113.7", "203.0.113.7", "203.0.113.7", "xff"},
		{"caller spoofs trusted entries", []string{"10.9.9.9, 10.8.8.8, 203.0.113.7, 10.1.1.1"}, "203.0.113.7", "203.0.113.7", "203.0.113.7", "xff"},
		{"IPv6 client, IPv6 balancer", []string{"2001:db8::7, 2001:db8:e::1"}, "2001:db8::7", "2001:db8::7", "2001:db8::7", "xff"},
		{"client with a port", []string{"203.0.113.7:4711, 10.1.1.1"}, "203.0.113.7", "203.0.113.7", "203.0.113.7", "xff"},
		{"empty member", []string{"203.0.113.7, , 10.1.1.1"}, "203.0.113.7", "203.0.113.7", "203.0.113.7", "xff"},
		{"two header lines", []string{"6.6.6.6, 203.0.113.7", "10.1.1.1"}, "203.0.113.7", "203.0.113.7", "203.0.113.7", "xff"},

		// Where they part.
		{"garbage in the trusted part", []string{"203.0.113.7, garbage, 10.1.1.1"}, "127.0.0.1", "203.0.113.7", "10.1.1.1", "invalid_address"},
		{"every member trusted", []string{"10.1.1.1, 10.2.2.2"}, "127.0.0.1", "127.0.0.1", "10.1.1.1", "short_chain"},
		{"zone in the client", []string{"fe80::1%eth0, 10.1.1.1"}, "127.0.0.1", "fe80::1", "10.1.1.1", "invalid_address"},
		{"no chain", nil, "127.0.0.1", "127.0.0.1", "127.0.0.1", "short_chain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ask := func(url string) (string, http.Header) { return askWithXFF(t, url, tc.xff...) }
			got, header := ask(edgekit.URL("/"))
			gotCaddy, _ := ask(caddyStrict.URL("/"))
			gotNginx, _ := ask(nginx.URL("/"))
			if got != tc.edgekit || header.Get("X-Reason") != tc.reason {
				t.Errorf("client_ip recursive: %s (%s), want %s (%s)", got, header.Get("X-Reason"), tc.edgekit, tc.reason)
			}
			if gotCaddy != tc.caddy {
				t.Errorf("Caddy trusted_proxies_strict: %s, want %s", gotCaddy, tc.caddy)
			}
			if gotNginx != tc.nginx {
				t.Errorf("nginx real_ip_recursive: %s, want %s", gotNginx, tc.nginx)
			}
			t.Logf("XFF %q: client_ip %s (%s), Caddy strict %s, nginx %s", tc.xff, got, header.Get("X-Reason"), gotCaddy, gotNginx)
		})
	}

	// What recursive replaces: a fixed count fits one depth only. hops 1
	// answers the operator's own balancer; hops 2 refuses the requests
	// that come straight from the CDN.
	for _, tc := range []struct{ path, xff, want, reason string }{
		{"/hops1", "203.0.113.7, 10.1.1.1", "10.1.1.1", "xff"},
		{"/hops2", "203.0.113.7, 10.1.1.1", "203.0.113.7", "xff"},
		{"/hops2", "203.0.113.7", "127.0.0.1", "untrusted_hop"}, // the caller is taken for a balancer
	} {
		resp, body := Get(t, http.DefaultClient, edgekit.URL(tc.path), "X-Forwarded-For", tc.xff)
		if body != tc.want || resp.Header.Get("X-Reason") != tc.reason {
			t.Errorf("%s with %q: %s (%s), want %s (%s)", tc.path, tc.xff, body, resp.Header.Get("X-Reason"), tc.want, tc.reason)
		}
	}
}

// askWithXFF GETs url with one X-Forwarded-For field per line, requires a
// 200, and returns the body (the address the server resolved) and the
// response's header.
func askWithXFF(t *testing.T, url string, xff ...string) (string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for _, line := range xff {
		req.Header.Add("X-Forwarded-For", line)
	}
	resp, body := Do(t, http.DefaultClient, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %q", url, resp.StatusCode, body)
	}
	return strings.TrimSpace(body), resp.Header
}
