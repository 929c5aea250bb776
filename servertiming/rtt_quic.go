package servertiming

import (
	"net/http"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"github.com/quic-go/quic-go"
)

// The QUIC connection of an HTTP/3 request, for its RTT estimate
// ((*quic.Conn).ConnectionStats) and whether it accepted 0-RTT
// (ConnectionState), both safe to call from any goroutine.
//
// Neither Caddy v2.11.9 nor quic-go v0.63 offers a way to it from a
// handler: Caddy's HTTP/3 server sets no ConnContext (and keeps the server
// unexported), and quic-go's response writer exposes no connection. The
// writer holds it, in its unexported field conn (*http3.rawConn), whose
// field conn is the *quic.Conn. quicConnOf reads those two fields, after
// checking once, by reflection, that the writer's type and the fields'
// names and types are exactly these; if a quic-go release changes them, the
// rtt entry is left out of HTTP/3 responses and 0rtt is told only by the
// handshake state (TestServerTimingGoClient's HTTP/3 cases fail, so an
// upgrade cannot lose them silently).
var h3Conn struct {
	once     sync.Once
	typ      reflect.Type // *http3.responseWriter
	connOff  uintptr      // of responseWriter.conn
	quicOff  uintptr      // of rawConn.conn
	resolved bool
}

const http3Pkg = "github.com/quic-go/quic-go/http3"

// resolveH3Conn learns the field offsets from t, the type of an http3
// response writer, when it has the expected shape.
func resolveH3Conn(t reflect.Type) {
	if t.Kind() != reflect.Pointer || t.Elem().PkgPath() != http3Pkg || t.Elem().Name() != "responseWriter" {
		return
	}
	rw, ok := t.Elem().FieldByName("conn")
	if !ok || rw.Type.Kind() != reflect.Pointer || rw.Type.Elem().PkgPath() != http3Pkg || rw.Type.Elem().Name() != "rawConn" {
		return
	}
	qc, ok := rw.Type.Elem().FieldByName("conn")
	if !ok || qc.Type != reflect.TypeFor[*quic.Conn]() {
		return
	}
	h3Conn.typ, h3Conn.connOff, h3Conn.quicOff, h3Conn.resolved = t, rw.Offset, qc.Offset, true
}

// quicConnOf finds quic-go's response writer under w's wrappers and
// returns its connection, or nil.
func quicConnOf(w http.ResponseWriter) *quic.Conn {
	for range 16 {
		if isHTTP3Writer(w) {
			p := reflect.ValueOf(w).UnsafePointer()
			raw := *(*unsafe.Pointer)(unsafe.Add(p, h3Conn.connOff))
			if raw == nil {
				return nil
			}
			return *(**quic.Conn)(unsafe.Add(raw, h3Conn.quicOff))
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

// isHTTP3Writer says w is quic-go's response writer, of the shape
// resolveH3Conn checked (the first one seen decides, once).
func isHTTP3Writer(w http.ResponseWriter) bool {
	t := reflect.TypeOf(w)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Name() != "responseWriter" || t.Elem().PkgPath() != http3Pkg {
		return false
	}
	h3Conn.once.Do(func() { resolveH3Conn(t) })
	return h3Conn.resolved && t == h3Conn.typ
}

// quicRTT is the smoothed RTT of the request's QUIC connection, when it
// has a sample.
func quicRTT(w http.ResponseWriter) (time.Duration, bool) {
	c := quicConnOf(w)
	if c == nil {
		return 0, false
	}
	rtt := c.ConnectionStats().SmoothedRTT
	return rtt, rtt > 0
}
