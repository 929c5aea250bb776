package servertiming

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"runtime"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// discard is a ResponseWriter that keeps nothing but a header map, cleared
// between requests as a new response would start empty.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }

// benchLength and benchBody are the benchmarks' response, shared so that
// next allocates nothing: off, the compiler inlines next and sees the
// writer's type (a []byte("ok") stays on the stack), on it cannot, and a
// per-call []byte would be counted as the handler's.
var (
	benchLength = []string{"2"}
	benchBody   = []byte("ok")
)

// benchNext is the benchmarks' handler without an upstream.
var benchNext = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
	w.Header()["Content-Length"] = benchLength
	w.WriteHeader(200)
	_, err := w.Write(benchBody)
	return err
})

// BenchmarkHandler: the handler off (next called directly) beside on, in
// one run, for a response with Content-Length from a handler without an
// upstream: the cost of timing, the entries and writing them. (With an
// upstream, the trace's closures cannot be pooled: see
// BenchmarkHandlerUpstream.)
func BenchmarkHandler(b *testing.B) {
	next := benchNext
	h := testHandler()
	r := httptest.NewRequest("GET", "https://pop.example/x", nil)
	r.ProtoMajor = 2
	r.TLS = &tls.ConnectionState{HandshakeComplete: true}
	// As Caddy's server makes it: vars with the client IP's two and the
	// start time.
	vars := map[string]any{caddyhttp.ClientIPVarKey: "192.0.2.1", caddyhttp.TrustedProxyVarKey: false, caddyStartTime: time.Now()}
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
	w := &discard{h: http.Header{}}
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				delete(vars, VarOn) // a new request's variables
				var err error
				if mode == "off" {
					err = next.ServeHTTP(w, r)
				} else {
					err = h.ServeHTTP(w, r, next)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHandlerUpstream is BenchmarkHandler/on with the trace's hooks
// called as net/http's transport calls them for a reused connection: the
// cost of a request that reached an upstream, whose state is not pooled.
func BenchmarkHandlerUpstream(b *testing.B) {
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		tr := httptrace.ContextClientTrace(r.Context())
		tr.GetConn("origin:443")
		tr.GotConn(httptrace.GotConnInfo{Reused: true})
		tr.WroteRequest(httptrace.WroteRequestInfo{})
		tr.GotFirstResponseByte()
		return benchNext(w, r)
	})
	h := testHandler()
	r := httptest.NewRequest("GET", "https://pop.example/x", nil)
	r.ProtoMajor = 2
	r.TLS = &tls.ConnectionState{HandshakeComplete: true}
	vars := map[string]any{caddyhttp.ClientIPVarKey: "192.0.2.1", caddyhttp.TrustedProxyVarKey: false, caddyStartTime: time.Now()}
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
	w := &discard{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		delete(vars, VarOn) // a new request's variables
		if err := h.ServeHTTP(w, r, next); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTCPRTT is the rtt entry's TCP_INFO read on a loopback
// connection: one getsockopt, which a connection's requests share for
// rttReuse.
func BenchmarkTCPRTT(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := connRTT(c); !ok && runtime.GOOS == "linux" {
			b.Fatal("no rtt from TCP_INFO")
		}
	}
}
