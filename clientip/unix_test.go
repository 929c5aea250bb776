package clientip

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// unixRequest is a request as Go's server hands one in on a Unix socket:
// RemoteAddr "@" for an unnamed peer, the listener's address in the
// context.
func unixRequest(remoteAddr string, header http.Header) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://example.com/", nil)
	r.RemoteAddr = remoteAddr
	r.Header = header
	ctx := context.WithValue(r.Context(), http.LocalAddrContextKey, &net.UnixAddr{Name: "/run/caddy.sock", Net: "unix"})
	return r.WithContext(ctx)
}

func TestUnixSocketPeer(t *testing.T) {
	off := provision(t, `{"trusted_proxies":["10.0.0.0/8"]}`)
	on := provision(t, `{"trusted_proxies":["10.0.0.0/8"],"trusted_proxies_unix":true}`)
	onHops2 := provision(t, `{"trusted_proxies":["10.0.0.0/8"],"trusted_proxies_unix":true,"hops":2}`)
	onRecursive := provision(t, `{"trusted_proxies":["10.0.0.0/8"],"trusted_proxies_unix":true,"recursive":true}`)
	unixOnly := provision(t, `{"trusted_proxies_unix":true}`)
	for _, tc := range []struct {
		name       string
		h          *Handler
		r          *http.Request
		client     string
		reason     reason
		peerText   string
		wantViaEdg bool
	}{
		{"off: never the edge", off, unixRequest("@", hdr("X-Forwarded-For", callerIP)), "invalid IP", reasonUntrustedHop, "@", false},
		{"on: the first layer", on, unixRequest("@", hdr("X-Forwarded-For", "6.6.6.6, "+callerIP)), callerIP, reasonNone, "@", true},
		{"on: a named peer socket", on, unixRequest("/tmp/lb.sock", hdr("X-Forwarded-For", callerIP)), callerIP, reasonNone, "@", true},
		{"on: no chain", on, unixRequest("@", nil), "invalid IP", reasonShortChain, "@", false},
		{"on, hops 2: trusted hop", onHops2, unixRequest("@", hdr("X-Forwarded-For", callerIP+", 10.1.1.1")), callerIP, reasonNone, "@", true},
		{"on, hops 2: untrusted hop", onHops2, unixRequest("@", hdr("X-Forwarded-For", "10.1.1.1, "+callerIP)), "invalid IP", reasonUntrustedHop, "@", false},
		{"on, recursive", onRecursive, unixRequest("@", hdr("X-Forwarded-For", "10.9.9.9, "+callerIP+", 10.1.1.1, 10.2.2.2")), callerIP, reasonNone, "@", true},
		{"unix only: a TCP peer is not trusted", unixOnly, newRequest("GET", "http://example.com/", edgePeer, "X-Forwarded-For", callerIP), "10.0.0.1", reasonUntrustedHop, "10.0.0.1", false},
		{"unix only: the socket is", unixOnly, unixRequest("@", hdr("X-Forwarded-For", callerIP)), callerIP, reasonNone, "@", true},
		// A peer socket named like an address is still a Unix peer: its
		// name is the caller's choice, never a TCP edge's address.
		{"off: a peer socket named like the edge", off, unixRequest("10.9.9.9:80", hdr("X-Forwarded-For", callerIP)), "invalid IP", reasonUntrustedHop, "@", false},
		{"on: a peer socket named like an address", on, unixRequest("10.9.9.9:80", hdr("X-Forwarded-For", callerIP)), callerIP, reasonNone, "@", true},
		// "@" on a TCP listener is no Unix peer (another module wrote it).
		{"@ without a Unix listener", on, newRequest("GET", "http://example.com/", "@", "X-Forwarded-For", callerIP), "invalid IP", reasonInvalid, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.h.resolver.resolveRequest(tc.r)
			if res.client.String() != tc.client || res.reason != tc.reason || res.viaEdge() != tc.wantViaEdg || res.peerText != tc.peerText {
				t.Errorf("client %s reason %q via_edge %v peer %q, want %s %q %v %q", res.client, res.reason, res.viaEdge(), res.peerText, tc.client, tc.reason, tc.wantViaEdg, tc.peerText)
			}
		})
	}
}

// A Unix-socket peer that is not the edge has no address, and client_ip
// must still override what Caddy's own server options decided: with the
// server's trusted_proxies_unix and client_ip_headers, Caddy sets its
// client_ip variable from the caller's X-Forwarded-For, which the client_ip
// matcher, {client_ip} and the access log would then believe.
func TestUnixPeerOverridesCaddysClientIP(t *testing.T) {
	h := provision(t, `{"trusted_proxies":["10.0.0.0/8"]}`)
	r := unixRequest("@", hdr("X-Forwarded-For", "6.6.6.6"))
	w := httptest.NewRecorder()
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, nil)
	caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, "6.6.6.6") // as Caddy's server option leaves it
	caddyhttp.SetVar(r.Context(), caddyhttp.TrustedProxyVarKey, true)
	var clientIP, trusted any
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		clientIP = caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey)
		trusted = caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey)
		return nil
	})
	if err := h.ServeHTTP(w, r, next); err != nil {
		t.Fatal(err)
	}
	if clientIP != "@" || trusted != false {
		t.Errorf("client_ip var %v, trusted_proxy %v after client_ip; want @ (the peer) and false", clientIP, trusted)
	}
}

func TestServeUnixThroughTheEdge(t *testing.T) {
	h := provision(t, `{"trusted_proxies_unix":true}`)
	s, err := serveRequest(t, h, unixRequest("@", http.Header{"X-Forwarded-For": {"6.6.6.6, 203.0.113.7"}}))
	if err != nil {
		t.Fatal(err)
	}
	s.checkPlaceholders(t, "@", "xff", "true", callerIP)
	if xff := s.header["X-Forwarded-For"]; len(xff) != 1 || xff[0] != callerIP {
		t.Errorf("X-Forwarded-For upstream %q", xff)
	}
	s, err = serveRequest(t, provision(t, `{"trusted_proxies":["10.0.0.0/8"]}`), unixRequest("@", http.Header{"X-Forwarded-For": {callerIP}}))
	if err != nil {
		t.Fatal(err)
	}
	s.checkPlaceholders(t, "@", "peer", "false", "@")
	if xff, ok := s.header["X-Forwarded-For"]; ok {
		t.Errorf("not through the edge, X-Forwarded-For went on: %q", xff)
	}
}

func TestUnixRefusals(t *testing.T) {
	if _, err := tryProvision(`{"trusted_proxies_unix":true,"hops":2}`); err == nil {
		t.Error("hops 2 with trusted_proxies_unix alone accepted: the hop beyond the socket could never be trusted")
	}
	if _, err := tryProvision(`{"trusted_proxies_unix":true,"hops":2,"trusted_proxies":["10.0.0.0/8"]}`); err != nil {
		t.Errorf("hops 2 with trusted_proxies: %v", err)
	}
}
