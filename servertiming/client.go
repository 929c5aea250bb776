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

// clientDesc describes the client connection of r; w is the writer the
// handler got. 0rtt is a connection resumed with early data: the request
// was read before the TLS handshake completed (as Caddy's own `tls
// early_data` matcher tells it), or, over HTTP/3, quic-go accepted 0-RTT on
// the connection (a request sent as early data is often read only after
// the handshake completed). Caddy accepts no TCP early data.
func clientDesc(r *http.Request, w http.ResponseWriter) string {
	proto := min(max(r.ProtoMajor, 1), 3) - 1
	mode := tlsNone
	switch {
	case r.TLS == nil:
	case !r.TLS.HandshakeComplete:
		mode = tls0RTT
	case r.TLS.DidResume:
		mode = tlsResumed
		// Only a resumed connection can have had 0-RTT.
		if r.ProtoMajor == 3 {
			if c := quicConnOf(w); c != nil && c.ConnectionState().Used0RTT {
				mode = tls0RTT
			}
		}
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

// clientRTT is the client connection's smoothed round-trip time: QUIC's
// estimate for HTTP/3, the kernel's (TCP_INFO) for TCP where the platform
// reports it. w is the writer the handler got.
func clientRTT(r *http.Request, w http.ResponseWriter) (time.Duration, bool) {
	if r.ProtoMajor == 3 {
		return quicRTT(w)
	}
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
