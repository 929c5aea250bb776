package edgebench

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// testServer serves one handler over TLS on 127.0.0.1: h1 and h2 on a TCP
// port (httptest), h3 on a UDP port (quic-go), with the same self-signed
// certificate. It counts the connections it accepts and remembers who
// called.
type testServer struct {
	URL   string // https://127.0.0.1:<tcp port>
	H3URL string // https://127.0.0.1:<udp port>

	tcpConns, quicConns atomic.Int64
	certs               []tls.Certificate

	mu      sync.Mutex
	remotes []string // RemoteAddr of every request
}

func startTestServer(t *testing.T, h http.Handler) *testServer {
	t.Helper()
	s := &testServer{}
	recording := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.remotes = append(s.remotes, r.RemoteAddr)
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
	ts := httptest.NewUnstartedServer(recording)
	ts.EnableHTTP2 = true
	ts.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.tcpConns.Add(1)
		}
	}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	s.URL = ts.URL
	s.certs = ts.TLS.Certificates

	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	h3 := &http3.Server{
		Handler:   recording,
		TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: ts.TLS.Certificates}),
		ConnContext: func(ctx context.Context, _ *quic.Conn) context.Context {
			s.quicConns.Add(1)
			return ctx
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		h3.Serve(udp)
	}()
	t.Cleanup(func() {
		h3.Close()
		udp.Close()
		<-done
	})
	s.H3URL = "https://" + udp.LocalAddr().String()
	return s
}

// urlFor returns the server's URL for a protocol.
func (s *testServer) urlFor(p Proto) string {
	if p == H3 {
		return s.H3URL
	}
	return s.URL
}

func (s *testServer) conns(p Proto) int64 {
	if p == H3 {
		return s.quicConns.Load()
	}
	return s.tcpConns.Load()
}

func (s *testServer) remoteAddrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.remotes...)
}

// certificates is the server's self-signed certificate, for more servers.
func (s *testServer) certificates() []tls.Certificate { return s.certs }
