package servertiming

import (
	"context"
	"crypto/tls"
	"net"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"
)

func TestClientDesc(t *testing.T) {
	for _, tc := range []struct {
		proto int
		tls   *tls.ConnectionState
		want  string
	}{
		{1, nil, `"h1 tls=none"`},
		{2, &tls.ConnectionState{HandshakeComplete: true}, `"h2 tls=new"`},
		{2, &tls.ConnectionState{HandshakeComplete: true, DidResume: true}, `"h2 tls=resumed"`},
		{3, &tls.ConnectionState{HandshakeComplete: false, DidResume: true}, `"h3 tls=0rtt"`},
		{3, &tls.ConnectionState{HandshakeComplete: true, DidResume: true}, `"h3 tls=resumed"`}, // no QUIC conn behind this writer
		{0, nil, `"h1 tls=none"`},
		{9, nil, `"h3 tls=none"`},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.ProtoMajor, r.TLS = tc.proto, tc.tls
		if got := clientDesc(r, httptest.NewRecorder()); got != tc.want {
			t.Errorf("proto %d tls %+v: %s, want %s", tc.proto, tc.tls, got, tc.want)
		}
	}
}

// TestTCPRTTShared: a connection's requests share one TCP_INFO reading for
// rttReuse, then the next reads again.
func TestTCPRTTShared(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_INFO is read on Linux only")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := &tcpConn{conn: c}
	r := httptest.NewRequest("GET", "/", nil)
	r = r.WithContext(context.WithValue(r.Context(), connKey{}, tc))
	now := time.Second
	rtt, ok := clientRTT(r, nil, now)
	if !ok || rtt <= 0 {
		t.Fatalf("first read: %v %v", rtt, ok)
	}
	tc.conn = nil // a read now would fail
	if got, ok := clientRTT(r, nil, now+rttReuse-1); !ok || got != rtt {
		t.Errorf("within rttReuse: %v %v, want the shared %v", got, ok, rtt)
	}
	if _, ok := clientRTT(r, nil, now+rttReuse); ok {
		t.Errorf("after rttReuse: the reading was not renewed")
	}
	if _, ok := clientRTT(r, nil, now+rttReuse+1); ok {
		t.Errorf("a connection that cannot tell stays so until renewed")
	}
}
