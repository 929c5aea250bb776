package servertiming

import (
	"context"
	"net"
	"net/http"
	"time"
)

// The client entry's desc: `"<protocol> tls=<mode>"`, a quoted-string with
// no escapes (protocol h1, h2 or h3; mode none, new, resumed or 0rtt).
var clientDescs = [4][4]string{
	{`"h1 tls=none"`, `"h1 tls=new"`, `"h1 tls=resumed"`, `"h1 tls=0rtt"`},
	{`"h2 tls=none"`, `"h2 tls=new"`, `"h2 tls=resumed"`, `"h2 tls=0rtt"`},
	{`"h3 tls=none"`, `"h3 tls=new"`, `"h3 tls=resumed"`, `"h3 tls=0rtt"`},
}

const (
	tlsNone = iota
	tlsNew
	tlsResumed
	tls0RTT
)

// clientDesc describes the client connection of r. A request read before
// the TLS handshake completed came as early data (0-RTT): Caddy's own
// `tls early_data` matcher tells it the same way (HTTP/3's 0-RTT; Caddy
// accepts no TCP early data).
func clientDesc(r *http.Request) string {
	proto := min(max(r.ProtoMajor, 1), 3) - 1
	mode := tlsNone
	switch {
	case r.TLS == nil:
	case !r.TLS.HandshakeComplete:
		mode = tls0RTT
	case r.TLS.DidResume:
		mode = tlsResumed
	default:
		mode = tlsNew
	}
	return clientDescs[proto][mode]
}

// connKey holds the request's TCP connection in its context.
type connKey struct{}

// keepConn is registered with each HTTP server (RegisterConnContext), so
// that the connection's TCP_INFO can be read for its requests. Registered
// by each server_timing handler of a config, it stores the connection once.
func keepConn(ctx context.Context, c net.Conn) context.Context {
	if ctx.Value(connKey{}) != nil {
		return ctx
	}
	return context.WithValue(ctx, connKey{}, c)
}

// clientRTT is the kernel's smoothed round-trip time of the request's TCP
// connection, when it has one and the platform reports it.
func clientRTT(r *http.Request) (time.Duration, bool) {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	// Through TLS and any listener wrapper, down to the TCP connection.
	for range 8 {
		switch v := c.(type) {
		case *net.TCPConn:
			return tcpRTT(v)
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return 0, false
		}
	}
	return 0, false
}
