package integration

import (
	"net/http"
	"strings"
	"testing"
)

// TestReverseProxyOverEveryProtocol proves the harness itself: a real Caddy
// proxies to a real origin over HTTP/1.1, HTTP/2 and HTTP/3, and a bad
// reload is refused while the old config keeps serving.
func TestReverseProxyOverEveryProtocol(t *testing.T) {
	origin := EchoOrigin(t)
	c := StartCaddy(t, `
http://127.0.0.1:{$HTTP_PORT} {
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

	status, body := c.Load(`http://127.0.0.1:{$HTTP_PORT} {
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
