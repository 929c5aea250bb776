package integration

import (
	"net/http"
	"testing"
)

// TestClientIPAgainstCaddyDefaultAndNginx sends the same X-Forwarded-For
// lines, from a trusted peer, to Caddy's server trusted_proxies with
// client_ip_headers (without trusted_proxies_strict), to nginx's realip
// without real_ip_recursive, and to client_ip's default (hops 1), for
// docs/migrate-client-ip.md. (With trusted_proxies_strict and
// real_ip_recursive: TestClientIPRecursiveAgainstNginxAndCaddy.)
func TestClientIPAgainstCaddyDefaultAndNginx(t *testing.T) {
	// nginx first: without it the test skips before any Caddy starts.
	nginx := StartNginx(t, "", `
		set_real_ip_from 127.0.0.1/32;
		real_ip_header X-Forwarded-For;
		location / { return 200 "$remote_addr"; }`)
	edgekit := StartCaddy(t, `
http://{$HOST}:{$HTTP_PORT} {
	client_ip {
		trusted_proxies 127.0.0.1/32
	}
	header X-Reason {http.client_ip.reason}
	respond "{client_ip}"
}`)
	caddy := StartCaddyWith(t, Options{Global: `servers {
		trusted_proxies static 127.0.0.1/32
		client_ip_headers X-Forwarded-For
	}`}, `
http://{$HOST}:{$HTTP_PORT} {
	respond "{client_ip}"
}`)
	for _, tc := range []struct {
		name, xff             string
		edgekit, caddy, nginx string
		reason                string // client_ip's
	}{
		{"one entry", "203.0.113.7", "203.0.113.7", "203.0.113.7", "203.0.113.7", "xff"},
		// The caller wrote 6.6.6.6; the edge appended what it saw.
		{"caller-written entry", "6.6.6.6, 203.0.113.7", "203.0.113.7", "6.6.6.6", "203.0.113.7", "xff"},
		{"garbage written by the caller", "garbage, 203.0.113.7", "203.0.113.7", "203.0.113.7", "203.0.113.7", "xff"},
		{"garbage as the edge's entry", "203.0.113.7, garbage", "127.0.0.1", "203.0.113.7", "127.0.0.1", "invalid_address"},
		{"entry with a port", "203.0.113.7:4711", "203.0.113.7", "203.0.113.7", "203.0.113.7", "xff"},
		{"no header", "", "127.0.0.1", "127.0.0.1", "127.0.0.1", "short_chain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var xff []string
			if tc.xff != "" {
				xff = []string{tc.xff}
			}
			ask := func(url string) (string, http.Header) { return askWithXFF(t, url, xff...) }
			got, header := ask(edgekit.URL("/"))
			gotCaddy, _ := ask(caddy.URL("/"))
			gotNginx, _ := ask(nginx.URL("/"))
			t.Logf("XFF %q: client_ip %s (%s), Caddy %s, nginx %s", tc.xff, got, header.Get("X-Reason"), gotCaddy, gotNginx)
			if got != tc.edgekit || header.Get("X-Reason") != tc.reason {
				t.Errorf("client_ip: %s (%s), want %s (%s)", got, header.Get("X-Reason"), tc.edgekit, tc.reason)
			}
			if gotCaddy != tc.caddy {
				t.Errorf("Caddy trusted_proxies: %s, want %s", gotCaddy, tc.caddy)
			}
			if gotNginx != tc.nginx {
				t.Errorf("nginx realip: %s, want %s", gotNginx, tc.nginx)
			}
		})
	}
}
