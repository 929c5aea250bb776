package integration

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// What client_ip lets through to the origin, end to end: a real Caddy runs
// client_ip then reverse_proxy to an origin that echoes the headers it got.
// The test client plays a CDN that relays the caller's own headers (as CDNs
// do), or a caller that reaches Caddy directly.

// clientIPCallerHeaders are the client-address headers a caller writes,
// which a CDN relays as written and origin frameworks read.
var clientIPCallerHeaders = map[string]string{
	"X-Real-IP":                 "6.6.6.6",
	"True-Client-IP":            "6.6.6.6",
	"Fastly-Client-IP":          "6.6.6.6",
	"X-Client-IP":               "6.6.6.6",
	"X-Cluster-Client-IP":       "6.6.6.6",
	"Client-IP":                 "6.6.6.6",
	"Forwarded":                 "for=6.6.6.6",
	"CloudFront-Viewer-Address": "6.6.6.6:4711",
	"X-Originating-IP":          "6.6.6.6",
	"X-Forwarded":               "for=6.6.6.6",
	"Forwarded-For":             "6.6.6.6",
}

// TestClientIPThroughTheEdgeOnlyResolvedAddressHeaders: a request that came
// through the edge (right peer, right secret or signature) carries the
// caller's own address headers; the origin gets none of them, only the
// headers client_ip wrote from the resolved client: X-Forwarded-For (which
// reverse_proxy extends with the peer) and, in header mode, the configured
// header; in Forwarded mode, Forwarded from the client's element on.
func TestClientIPThroughTheEdgeOnlyResolvedAddressHeaders(t *testing.T) {
	origin := EchoOrigin(t)
	route := func(path, options string) string {
		return `
	handle ` + path + `* {
		client_ip {
			trusted_proxies 127.0.0.0/8 ::1
			` + options + `
		}
		request_header X-Seen-Via-Edge {http.client_ip.via_edge}
		reverse_proxy ` + origin + `
	}`
	}
	c := StartCaddyWith(t, Options{Env: []string{"EDGE_SECRET=cdn-proves-itself", "EDGE_KEY_K1=" + signedKey1}}, `
http://{$HOST}:{$HTTP_PORT} {`+
		route("/cf/", "header CF-Connecting-IP\n\t\t\tsecret X-Edge-Secret {env.EDGE_SECRET}")+
		route("/xff/", "secret X-Edge-Secret {env.EDGE_SECRET}")+
		route("/fwd/", "forwarded")+
		route("/signed/", "verify {\n\t\t\t\tkey k1 {env.EDGE_KEY_K1}\n\t\t\t}\n\t\t\tuntrusted reject")+`
}`)
	client := c.Client()

	for _, tc := range []struct {
		name, path string
		edge       map[string]string   // what the edge itself wrote
		want       map[string][]string // the address headers the origin may get
	}{
		{"header CF-Connecting-IP", "/cf/x",
			map[string]string{"CF-Connecting-IP": "203.0.113.7", "X-Edge-Secret": "cdn-proves-itself", "X-Forwarded-For": "6.6.6.6, 203.0.113.7"},
			map[string][]string{"Cf-Connecting-Ip": {"203.0.113.7"}, "X-Forwarded-For": {"203.0.113.7, 127.0.0.1"}}},
		{"X-Forwarded-For", "/xff/x",
			map[string]string{"X-Edge-Secret": "cdn-proves-itself", "X-Forwarded-For": "6.6.6.6, 203.0.113.7", "CF-Connecting-IP": "6.6.6.6"},
			map[string][]string{"X-Forwarded-For": {"203.0.113.7, 127.0.0.1"}}},
		{"Forwarded", "/fwd/x",
			map[string]string{"Forwarded": `for=6.6.6.6, for="203.0.113.7:4711";proto=https`},
			map[string][]string{"Forwarded": {`for="203.0.113.7:4711";proto=https`}, "X-Forwarded-For": {"203.0.113.7, 127.0.0.1"}}},
		{"signed assertion", "/signed/x",
			map[string]string{"X-Edge-Assertion": assertionFor(signedKey1, "k1", "203.0.113.7", time.Now(), "GET", c.HTTPAddr(), "/signed/x"),
				"CF-Connecting-IP": "6.6.6.6"},
			map[string][]string{"X-Forwarded-For": {"203.0.113.7, 127.0.0.1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, c.URL(tc.path), nil)
			for name, value := range clientIPCallerHeaders {
				req.Header.Set(name, value)
			}
			for name, value := range tc.edge { // the edge's own, where it writes one of them
				req.Header.Set(name, value)
			}
			echo, _ := GetEcho(t, client, req)
			h := http.Header(echo.Headers)
			if h.Get("X-Seen-Via-Edge") != "true" {
				t.Fatalf("not through the edge: %v", h)
			}
			for _, name := range []string{"X-Real-Ip", "True-Client-Ip", "Fastly-Client-Ip", "X-Client-Ip", "X-Cluster-Client-Ip", "Client-Ip", "Forwarded", "Cf-Connecting-Ip", "X-Forwarded-For", "X-Edge-Secret", "X-Edge-Assertion"} {
				if got, want := h[name], tc.want[name]; !slices.Equal(got, want) {
					t.Errorf("origin got %s %q, want %q", name, got, want)
				}
			}
		})
	}
}

// TestClientIPUntrustedChainStartsAfresh: with Caddy's own trusted_proxies
// (the server option) or reverse_proxy's covering the peer, a request that
// did not come through the edge must not have reverse_proxy extend the
// caller's X-Forwarded-For nor keep its X-Forwarded-Host and -Proto:
// client_ip's verdict is the last word, and the origin gets the chain
// reverse_proxy starts from the TCP peer. Through the edge, the same
// configurations keep the chain from the client on.
func TestClientIPUntrustedChainStartsAfresh(t *testing.T) {
	origin := EchoOrigin(t)
	for _, tc := range []struct {
		name, global, proxy string
	}{
		{"server trusted_proxies", "servers {\n\t\ttrusted_proxies static 127.0.0.0/8 ::1\n\t}", "reverse_proxy " + origin},
		{"reverse_proxy trusted_proxies", "", "reverse_proxy " + origin + " {\n\t\t\ttrusted_proxies 127.0.0.0/8 ::1\n\t\t}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := StartCaddyWith(t, Options{Global: tc.global}, `
http://{$HOST}:{$HTTP_PORT} {
	handle /stranger/* {
		client_ip {
			trusted_proxies 192.0.2.0/24
		}
		`+tc.proxy+`
	}
	handle /edge/* {
		client_ip {
			trusted_proxies 127.0.0.0/8 ::1
		}
		`+tc.proxy+`
	}
}`)
			client := c.Client()
			send := func(path string) http.Header {
				req, _ := http.NewRequest(http.MethodGet, c.URL(path), nil)
				req.Header.Set("X-Forwarded-For", "6.6.6.6")
				req.Header.Set("X-Forwarded-Host", "evil.example")
				req.Header.Set("X-Forwarded-Proto", "https")
				echo, _ := GetEcho(t, client, req)
				return http.Header(echo.Headers)
			}

			h := send("/stranger/x")
			want := map[string][]string{"X-Forwarded-For": {"127.0.0.1"}, "X-Forwarded-Host": {c.HTTPAddr()}, "X-Forwarded-Proto": {"http"}}
			for name, value := range want {
				if got := h[name]; !slices.Equal(got, value) {
					t.Errorf("not through the edge: origin got %s %q, want %q", name, got, value)
				}
			}

			// Control: the same Caddy keeps what an edge wrote.
			h = send("/edge/x")
			want = map[string][]string{"X-Forwarded-For": {"6.6.6.6, 127.0.0.1"}, "X-Forwarded-Host": {"evil.example"}, "X-Forwarded-Proto": {"https"}}
			for name, value := range want {
				if got := h[name]; !slices.Equal(got, value) {
					t.Errorf("through the edge: origin got %s %q, want %q", name, got, value)
				}
			}
			if t.Failed() {
				t.Logf("origin got %s", strings.Join(h.Values("X-Forwarded-For"), " | "))
			}
		})
	}
}
