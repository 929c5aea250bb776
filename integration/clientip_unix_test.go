package integration

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// unixClient speaks HTTP/1.1 to the Unix socket at path, whatever the URL's
// host: a local proxy in front of Caddy.
func unixClient(t *testing.T, path string) *http.Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// TestClientIPUnixSocketPeer: behind a local proxy on a Unix socket,
// trusted_proxies_unix makes the socket the first trusted layer; without
// it the socket is never the edge, and client_ip overrides what the
// server's own trusted_proxies_unix read from the caller's headers.
func TestClientIPUnixSocketPeer(t *testing.T) {
	origin := EchoOrigin(t)
	dir, err := os.MkdirTemp("", "ck-sock-") // short: a socket path has ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	on, off := filepath.Join(dir, "on.sock"), filepath.Join(dir, "off.sock")
	site := func(sock, extra string) string {
		return `
http://sock.test:` + map[string]string{on: "81", off: "82"}[sock] + ` {
	bind unix/` + sock + `
	client_ip {
		trusted_proxies 10.0.0.0/8
		` + extra + `
	}
	request_header X-Seen-Client {client_ip}
	request_header X-Seen-Peer {http.client_ip.peer}
	request_header X-Seen-Reason {http.client_ip.reason}
	request_header X-Seen-Remote-Host {remote_host}
	reverse_proxy ` + origin + `
}`
	}
	// The server option makes Caddy itself believe X-Forwarded-For from a
	// Unix peer: client_ip must have the last word.
	StartCaddyWith(t, Options{Global: `servers {
		trusted_proxies_unix
		client_ip_headers X-Forwarded-For
	}`}, `
http://{$HOST}:{$HTTP_PORT} {
	respond "tcp"
}`+site(on, "trusted_proxies_unix\n\t\thops 2")+site(off, ""))

	for _, tc := range []struct {
		name, sock, xff, client, reason, upstreamXFF string
	}{
		{"opt-in: through the socket and a balancer", on, "6.6.6.6, 203.0.113.7, 10.1.1.1", "203.0.113.7", "xff", "203.0.113.7, 10.1.1.1"},
		{"opt-in: an untrusted hop", on, "203.0.113.7, 6.6.6.6", "@", "untrusted_hop", ""},
		{"default: the socket is not the edge", off, "203.0.113.7", "@", "untrusted_hop", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "http://sock.test/", nil)
			req.Header.Set("X-Forwarded-For", tc.xff)
			resp, body := Do(t, unixClient(t, tc.sock), req)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			var echo Echo
			if err := json.Unmarshal([]byte(body), &echo); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			h := http.Header(echo.Headers)
			if h.Get("X-Seen-Client") != tc.client || h.Get("X-Seen-Reason") != tc.reason || h.Get("X-Seen-Peer") != "@" {
				t.Errorf("client %q reason %q peer %q, want %q %q @", h.Get("X-Seen-Client"), h.Get("X-Seen-Reason"), h.Get("X-Seen-Peer"), tc.client, tc.reason)
			}
			if got := h.Get("X-Seen-Remote-Host"); got != "@" {
				t.Errorf("{remote_host} %q, want @ (the peer, whatever client_ip decides)", got)
			}
			// reverse_proxy has no peer address to append for a socket.
			if got := h.Get("X-Forwarded-For"); got != tc.upstreamXFF {
				t.Errorf("X-Forwarded-For upstream %q, want %q", got, tc.upstreamXFF)
			}
		})
	}
}
