package integration

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestClientIPHeaderList: a CDN header, then another, then X-Forwarded-For.
// A later header is read only when every earlier one is absent; one that
// is present but not a single address is the peer, never a reason to read
// the next, which the caller may have written. Upstream, only the header
// read goes on, rewritten to the client.
func TestClientIPHeaderList(t *testing.T) {
	origin := EchoOrigin(t)
	c := StartCaddy(t, `
http://{$HOST}:{$HTTP_PORT} {
	client_ip {
		trusted_proxies 127.0.0.1
		header CF-Connecting-IP True-Client-IP X-Forwarded-For
	}
	request_header X-Seen-Client {client_ip}
	request_header X-Seen-Reason {http.client_ip.reason}
	reverse_proxy `+origin+`
}`)
	for _, tc := range []struct {
		name    string
		header  []string
		client  string
		reason  string
		xff     string
		rewrite string // the header that goes on, rewritten to the client
	}{
		{"CDN header", []string{"CF-Connecting-IP", "[2001:db8::7]:443", "True-Client-IP", "6.6.6.6", "X-Forwarded-For", "6.6.6.7"}, "2001:db8::7", "header", "2001:db8::7, 127.0.0.1", "CF-Connecting-IP"},
		{"second header", []string{"True-Client-IP", "203.0.113.7", "X-Forwarded-For", "6.6.6.7"}, "203.0.113.7", "header", "203.0.113.7, 127.0.0.1", "True-Client-IP"},
		{"X-Forwarded-For last", []string{"X-Forwarded-For", "6.6.6.6, 203.0.113.7"}, "203.0.113.7", "xff", "203.0.113.7, 127.0.0.1", ""},
		{"CDN header garbage, second valid", []string{"CF-Connecting-IP", "garbage", "True-Client-IP", "6.6.6.6"}, "127.0.0.1", "invalid_address", "127.0.0.1", ""},
		{"CDN header empty, X-Forwarded-For valid", []string{"CF-Connecting-IP", "", "X-Forwarded-For", "6.6.6.6"}, "127.0.0.1", "invalid_address", "127.0.0.1", ""},
		{"CDN header twice", []string{"CF-Connecting-IP", "203.0.113.7", "CF-Connecting-IP", "6.6.6.6"}, "127.0.0.1", "invalid_address", "127.0.0.1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, c.URL("/"), nil)
			for i := 0; i+1 < len(tc.header); i += 2 {
				req.Header.Add(tc.header[i], tc.header[i+1])
			}
			echo, _ := GetEcho(t, c.Client(), req)
			h := http.Header(echo.Headers)
			if h.Get("X-Seen-Client") != tc.client || h.Get("X-Seen-Reason") != tc.reason {
				t.Errorf("client %s (%s), want %s (%s)", h.Get("X-Seen-Client"), h.Get("X-Seen-Reason"), tc.client, tc.reason)
			}
			if got := h.Values("X-Forwarded-For"); !slices.Equal(got, []string{tc.xff}) {
				t.Errorf("X-Forwarded-For upstream %q, want %q", got, tc.xff)
			}
			for _, name := range []string{"CF-Connecting-IP", "True-Client-IP"} {
				got := h.Values(name)
				switch {
				case name == tc.rewrite && !slices.Equal(got, []string{tc.client}):
					t.Errorf("%s upstream %q, want the client %s", name, got, tc.client)
				case name != tc.rewrite && got != nil:
					t.Errorf("%s went upstream: %q", name, got)
				}
			}
		})
	}
	if m := c.Metrics(); !strings.Contains(m, `caddy_client_ip_untrusted_total{action="allow",reason="invalid_address"} 3`+"\n") {
		t.Errorf("the three refusals are not counted:\n%s", grepLines(m, "caddy_client_ip"))
	}
}
