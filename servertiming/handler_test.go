package servertiming

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-edgekit/edgekit/internal/edgebench"
)

// recorder records every header written, 1xx included, as the client
// would see them (a copy of the header map at each WriteHeader).
type recorder struct {
	header  http.Header
	sent    []http.Header
	codes   []int
	body    strings.Builder
	flushes int
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	r.codes = append(r.codes, code)
	r.sent = append(r.sent, r.header.Clone())
}
func (r *recorder) Write(p []byte) (int, error) {
	if len(r.codes) == 0 || r.codes[len(r.codes)-1] < 200 {
		r.WriteHeader(200)
	}
	return r.body.Write(p)
}
func (r *recorder) Flush() { r.flushes++ }

// final is the final header as sent (or, if none was written, the map as
// net/http would send it after the handler).
func (r *recorder) final() http.Header {
	for i, c := range r.codes {
		if c >= 200 {
			return r.sent[i]
		}
	}
	return r.header
}

func newRequest(method string, proto int) *http.Request {
	r := httptest.NewRequest(method, "https://pop.example/x", nil)
	r.ProtoMajor = proto
	r.TLS = &tls.ConnectionState{HandshakeComplete: true}
	ctx := context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{})
	return r.WithContext(ctx)
}

func testHandler() *Handler { return &Handler{logger: zap.NewNop()} }

func entryNames(vals []string) []string {
	var n []string
	for _, e := range edgebench.ParseServerTiming(vals...) {
		n = append(n, e.Name)
	}
	return n
}

func serve(t *testing.T, h *Handler, w http.ResponseWriter, r *http.Request, next caddyhttp.HandlerFunc) error {
	t.Helper()
	return h.ServeHTTP(w, r, next)
}

// TestWriterEveryPath: the entries are on the final header whichever way
// the handlers inside write it.
func TestWriterEveryPath(t *testing.T) {
	for name, next := range map[string]caddyhttp.HandlerFunc{
		"WriteHeader": func(w http.ResponseWriter, r *http.Request) error { w.WriteHeader(201); return nil },
		"Write":       func(w http.ResponseWriter, r *http.Request) error { _, err := w.Write([]byte("x")); return err },
		"ReadFrom": func(w http.ResponseWriter, r *http.Request) error {
			_, err := w.(io.ReaderFrom).ReadFrom(strings.NewReader("x"))
			return err
		},
		"ResponseController.Flush": func(w http.ResponseWriter, r *http.Request) error {
			return http.NewResponseController(w).Flush()
		},
		"nothing": func(w http.ResponseWriter, r *http.Request) error { return nil },
		"an error after writing": func(w http.ResponseWriter, r *http.Request) error {
			w.WriteHeader(502)
			return caddyhttp.Error(502, errors.New("x"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			rec := newRecorder()
			rec.header.Set("Content-Length", "1")
			_ = serve(t, testHandler(), rec, newRequest("GET", 1), next)
			got := entryNames(rec.final()["Server-Timing"])
			if len(got) < 2 || got[0] != "edge" || got[1] != "client" {
				t.Fatalf("final header entries %v (%v)", got, rec.final())
			}
		})
	}
}

// TestInformationalWithoutEntries: a 103 from the upstream goes out as it
// is, and the final header after it still gets the entries.
func TestInformationalWithoutEntries(t *testing.T) {
	rec := newRecorder()
	_ = serve(t, testHandler(), rec, newRequest("GET", 2), func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(200)
		return nil
	})
	if len(rec.codes) != 2 || rec.codes[0] != 103 || rec.codes[1] != 200 {
		t.Fatalf("codes %v", rec.codes)
	}
	if v := rec.sent[0]["Server-Timing"]; v != nil {
		t.Errorf("103 carries Server-Timing %q", v)
	}
	if n := entryNames(rec.sent[1]["Server-Timing"]); len(n) == 0 || n[0] != "edge" {
		t.Errorf("200 after 103: entries %v", n)
	}
}

// TestInformationalFiltered: an upstream's 1xx (100, 102, 103), whose
// fields reverse_proxy copies into the map for WriteHeader and deletes
// after, goes out without the upstream's Timing-Allow-Origin and without
// its PoP-named or malformed Server-Timing entries; others stay.
func TestInformationalFiltered(t *testing.T) {
	for _, proto := range []int{1, 2, 3} {
		rec := newRecorder()
		_ = serve(t, testHandler(), rec, newRequest("GET", proto), func(w http.ResponseWriter, r *http.Request) error {
			for _, code := range []int{100, 102, 103} {
				up := http.Header{"Server-Timing": {`edge;dur=0, app;dur=1, x;desc=a"b, total;dur=0`},
					"Timing-Allow-Origin": {"*"}, "timing-allow-origin": {"*"}, "Link": {"</a.css>; rel=preload"}}
				for k, v := range up {
					w.Header()[k] = v
				}
				w.WriteHeader(code)
				for k := range up {
					delete(w.Header(), k)
				}
			}
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(200)
			return nil
		})
		if len(rec.codes) != 4 {
			t.Fatalf("h%d codes %v", proto, rec.codes)
		}
		for i, code := range rec.codes[:3] {
			h := rec.sent[i]
			if n := entryNames(h["Server-Timing"]); strings.Join(n, " ") != "app" {
				t.Errorf("h%d %d: Server-Timing %q, want app alone", proto, code, h["Server-Timing"])
			}
			if h["Timing-Allow-Origin"] != nil || h["timing-allow-origin"] != nil {
				t.Errorf("h%d %d: upstream Timing-Allow-Origin sent: %v", proto, code, h)
			}
			if h.Get("Link") == "" {
				t.Errorf("h%d %d: Link lost", proto, code)
			}
		}
		if n := entryNames(rec.final()["Server-Timing"]); len(n) == 0 || n[0] != "edge" {
			t.Errorf("h%d final entries %v", proto, n)
		}
	}
}

// TestStreamedTrailer: a body of unknown length over HTTP/2 declares the
// trailer and keeps the header's entries (and the upstream's) under the
// lowercase name; a known length, HTTP/1.1, HEAD or a 204 gets no trailer.
func TestStreamedTrailer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		method  string
		proto   int
		status  int
		length  bool
		trailer bool
	}{
		{"h2 stream", "GET", 2, 200, false, true},
		{"h3 stream", "GET", 3, 200, false, true},
		{"h2 length", "GET", 2, 200, true, false},
		{"h1 stream", "GET", 1, 200, false, false},
		{"h2 HEAD", "HEAD", 2, 200, false, false},
		{"h2 204", "GET", 2, 204, false, false},
		{"h2 304", "GET", 2, 304, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			_ = serve(t, testHandler(), rec, newRequest(tc.method, tc.proto), func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("Server-Timing", "app;dur=1")
				if tc.length {
					w.Header().Set("Content-Length", "2")
				}
				w.WriteHeader(tc.status)
				if bodyAllowed(tc.status) && tc.method != "HEAD" {
					_, _ = w.Write([]byte("ok"))
				}
				return nil
			})
			sent := rec.final()
			declared := sent.Get("Trailer") == "Server-Timing"
			if declared != tc.trailer {
				t.Fatalf("Trailer %q, want declared %v", sent["Trailer"], tc.trailer)
			}
			head := sent["Server-Timing"]
			if tc.trailer {
				if head != nil {
					t.Errorf("declared trailer name also in the header map: %q", head)
				}
				head = sent[streamedKey]
				tr := entryNames(rec.header["Server-Timing"])
				if len(tr) != 1 || tr[0] != "total" {
					t.Errorf("trailer entries %v", tr)
				}
			}
			n := entryNames(head)
			if len(n) < 3 || n[0] != "edge" || n[len(n)-1] != "app" {
				t.Errorf("header entries %v, want the PoP's (edge...) then the upstream's", n)
			}
		})
	}
}

// TestUpstreamEntries: with a trace driven as net/http's transport drives
// it, the entries say new (with dial and TLS) or reused, and edge leaves
// out the upstream wait.
func TestUpstreamEntries(t *testing.T) {
	for _, reused := range []bool{false, true} {
		rec := newRecorder()
		rec.header.Set("Content-Length", "0")
		_ = serve(t, testHandler(), rec, newRequest("GET", 2), func(w http.ResponseWriter, r *http.Request) error {
			tr := httptrace.ContextClientTrace(r.Context())
			tr.GetConn("origin.internal:443")
			if !reused {
				tr.TLSHandshakeStart()
				tr.TLSHandshakeDone(tls.ConnectionState{}, nil)
			}
			tr.GotConn(httptrace.GotConnInfo{Reused: reused})
			tr.WroteRequest(httptrace.WroteRequestInfo{})
			time.Sleep(2 * time.Millisecond) // the origin's work: origin >= 2 ms
			tr.GotFirstResponseByte()
			w.WriteHeader(200)
			return nil
		})
		v := rec.final()["Server-Timing"]
		m := map[string]edgebench.ServerTimingMetric{}
		for _, e := range edgebench.ParseServerTiming(v...) {
			m[e.Name] = e
		}
		want := map[bool]string{false: "new", true: "reused"}[reused]
		if m["origin-conn"].Desc != want {
			t.Errorf("reused %v: %q", reused, v)
		}
		_, dial := m["origin-dial"]
		_, tlsT := m["origin-tls"]
		if dial == reused || tlsT == reused {
			t.Errorf("reused %v: dial %v tls %v: %q", reused, dial, tlsT, v)
		}
		if m["origin"].Dur < 2*time.Millisecond {
			t.Errorf("origin %v < 2ms", m["origin"].Dur)
		}
		if strings.Contains(strings.Join(v, ","), "origin.internal") {
			t.Errorf("the upstream's address leaks: %q", v)
		}
	}
}

// TestUpstreamRead: the arithmetic of read, from recorded event times.
func TestUpstreamRead(t *testing.T) {
	var u upstream
	u.used.Store(true)
	u.getConn.Store(10)
	u.tlsStart.Store(12)
	u.tlsDone.Store(19)
	u.gotConn.Store(20)
	u.wrote.Store(21)
	u.firstByte.Store(50)
	u.reused.Store(connNew)
	u.wait.Store(40)
	got := u.read(60, true)
	want := upstreamTimes{wait: 40, ok: true, origin: 29, dial: 2, tls: 7, hasDial: true, hasTLS: true}
	if got != want {
		t.Errorf("read: %+v, want %+v", got, want)
	}
	// An attempt without a response counts as upstream wait until now.
	u.firstByte.Store(0)
	if got := u.read(70, true); got.ok || got.wait != 40+60 {
		t.Errorf("open attempt: %+v", got)
	}
	// Response before the request was all written: from GotConn.
	u.firstByte.Store(30)
	u.wrote.Store(35)
	if got := u.read(70, true); got.origin != 10 {
		t.Errorf("early response: origin %v, want 10", got.origin)
	}
}

// TestUpstreamReadAfter1xx: after a 1xx (whose first byte
// GotFirstResponseByte reports), origin and the upstream wait run to the
// final header's arrival at the writer, not to the 1xx; a header written
// without a final response (an error's) keeps the 1xx's time, and so does
// a round trip without a 1xx.
func TestUpstreamReadAfter1xx(t *testing.T) {
	var tm timing
	tr := tm.hooks()
	tm.start = time.Now()
	tr.GetConn("origin:80")
	tr.GotConn(httptrace.GotConnInfo{Reused: true})
	tr.WroteRequest(httptrace.WroteRequestInfo{})
	if err := tr.Got1xxResponse(http.StatusEarlyHints, nil); err != nil {
		t.Fatal(err)
	}
	tr.GotFirstResponseByte()
	u := &tm.up
	wrote, fb, gc, wait := u.wrote.Load(), u.firstByte.Load(), u.getConn.Load(), u.wait.Load()
	at := fb + int64(20*time.Millisecond)
	got := u.read(at, true)
	if got.origin != time.Duration(at-wrote) || got.wait != time.Duration(at-gc) {
		t.Errorf("after a 103: origin %v wait %v, want %v and %v (to the final header)", got.origin, got.wait, time.Duration(at-wrote), time.Duration(at-gc))
	}
	if got := u.read(at, false); got.origin != time.Duration(fb-wrote) || got.wait != time.Duration(wait) {
		t.Errorf("no final header: origin %v wait %v, want the 1xx's %v and %v", got.origin, got.wait, time.Duration(fb-wrote), time.Duration(wait))
	}
	// A new attempt forgets the 1xx.
	tr.GetConn("origin:80")
	tr.GotConn(httptrace.GotConnInfo{Reused: true})
	tr.WroteRequest(httptrace.WroteRequestInfo{})
	tr.GotFirstResponseByte()
	wrote, fb = u.wrote.Load(), u.firstByte.Load()
	if got := u.read(fb+int64(time.Second), true); got.origin != time.Duration(fb-wrote) {
		t.Errorf("no 1xx on the retry: origin %v, want %v", got.origin, time.Duration(fb-wrote))
	}
}

func TestTimingAllowOriginHeader(t *testing.T) {
	h := testHandler()
	h.tao = "https://a.example, https://b.example"
	rec := newRecorder()
	r := newRequest("GET", 2)
	r.Header.Set("Origin", "https://evil.example")
	_ = serve(t, h, rec, r, func(w http.ResponseWriter, r *http.Request) error { return nil })
	if got := rec.final()["Timing-Allow-Origin"]; len(got) != 1 || got[0] != h.tao {
		t.Errorf("Timing-Allow-Origin %q", got)
	}
	rec = newRecorder()
	_ = serve(t, testHandler(), rec, r, func(w http.ResponseWriter, r *http.Request) error { return nil })
	if got := rec.final()["Timing-Allow-Origin"]; got != nil {
		t.Errorf("unconfigured: Timing-Allow-Origin %q (the request's Origin reflected?)", got)
	}
}

// TestVarsContract: the handler marks the request for the other modules
// and reports the durations they leave.
func TestVarsContract(t *testing.T) {
	rec := newRecorder()
	_ = serve(t, testHandler(), rec, newRequest("GET", 2), func(w http.ResponseWriter, r *http.Request) error {
		if on, _ := caddyhttp.GetVar(r.Context(), VarOn).(bool); !on {
			t.Errorf("%s not set for the handlers inside", VarOn)
		}
		caddyhttp.SetVar(r.Context(), VarThrottle, 1500*time.Microsecond)
		w.WriteHeader(200)
		caddyhttp.SetVar(r.Context(), VarSubstitute, 2*time.Millisecond)
		_, _ = w.Write([]byte("body"))
		return nil
	})
	head := edgebench.ParseServerTiming(rec.final()[streamedKey]...)
	var thr bool
	for _, e := range head {
		thr = thr || (e.Name == "throttle" && e.Dur == 1500*time.Microsecond)
	}
	if !thr {
		t.Errorf("header %v has no throttle;dur=1.5", head)
	}
	tr := edgebench.ParseServerTiming(rec.header["Server-Timing"]...)
	if len(tr) != 2 || tr[1].Name != "substitute" || tr[1].Dur != 2*time.Millisecond {
		t.Errorf("trailer %+v, want total then substitute;dur=2", tr)
	}
}

// TestUpstreamTrailerKept: an upstream's own Server-Timing trailer
// (reverse_proxy sets it under http.TrailerPrefix after the body) and the
// handler's totals both reach the trailer, under both keys alike: net/http
// promotes the prefixed key over the declared one, and quic-go writes
// whichever of the two it meets last.
func TestUpstreamTrailerKept(t *testing.T) {
	rec := newRecorder()
	_ = serve(t, testHandler(), rec, newRequest("GET", 3), func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Trailer", "Server-Timing")
		w.WriteHeader(200)
		_, _ = w.Write([]byte("body"))
		w.Header().Add(http.TrailerPrefix+"Server-Timing", "up;dur=1")
		return nil
	})
	for _, key := range []string{"Server-Timing", http.TrailerPrefix + "Server-Timing"} {
		if n := entryNames(rec.header[key]); strings.Join(n, " ") != "up total" {
			t.Errorf("trailer under %q: %v, want up then total", key, n)
		}
	}
}

// TestUpstreamDeclaredTrailer: an upstream that declares a Server-Timing
// trailer on a response of known length: quic-go would leave the
// handler's header entries out of the header block, so they go under the
// lowercase name.
func TestUpstreamDeclaredTrailer(t *testing.T) {
	rec := newRecorder()
	_ = serve(t, testHandler(), rec, newRequest("GET", 3), func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Trailer", "Server-Timing")
		w.Header().Set("Content-Length", "4")
		w.WriteHeader(200)
		_, _ = w.Write([]byte("body"))
		return nil
	})
	sent := rec.final()
	if n := entryNames(sent[streamedKey]); len(n) == 0 || n[0] != "edge" {
		t.Errorf("header entries under %q: %v (header %v)", streamedKey, n, sent)
	}
	if v := sent["Server-Timing"]; v != nil {
		t.Errorf("header entries under the declared trailer name: %q", v)
	}
}

// TestUpstreamDeclaredTrailerValues: reverse_proxy adds the trailer of an
// upstream that declared it under the declared name after the body; the
// handler's totals go after it, not over it.
func TestUpstreamDeclaredTrailerValues(t *testing.T) {
	for _, proto := range []int{2, 3} {
		rec := newRecorder()
		_ = serve(t, testHandler(), rec, newRequest("GET", proto), func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Server-Timing", "up-head;dur=1")
			w.Header().Set("Trailer", "Server-Timing")
			w.WriteHeader(200)
			_, _ = w.Write([]byte("body"))
			w.Header().Add("Server-Timing", "up-end;dur=2")
			return nil
		})
		if n := entryNames(rec.header["Server-Timing"]); strings.Join(n, " ") != "up-end total" {
			t.Errorf("h%d trailer: %v, want up-end then total", proto, n)
		}
		if n := entryNames(rec.final()[streamedKey]); len(n) < 2 || n[0] != "edge" || n[len(n)-1] != "up-head" {
			t.Errorf("h%d header: %v", proto, n)
		}
		if got := rec.final()["Trailer"]; len(got) != 1 {
			t.Errorf("h%d: Trailer %q: declared twice?", proto, got)
		}
	}
}

// TestNothingWrittenNoTrailer: over HTTP/2, a response whose handlers
// wrote nothing gets the header entries and no trailer announcement.
// (An error's gets none: TestErrorResponseLeftToItsHandlers.)
func TestNothingWrittenNoTrailer(t *testing.T) {
	for name, next := range map[string]caddyhttp.HandlerFunc{
		"empty": func(w http.ResponseWriter, r *http.Request) error { return nil },
	} {
		rec := newRecorder()
		_ = serve(t, testHandler(), rec, newRequest("GET", 2), next)
		if v := rec.header["Trailer"]; v != nil {
			t.Errorf("%s: Trailer %q", name, v)
		}
		if n := entryNames(rec.header["Server-Timing"]); len(n) == 0 || n[0] != "edge" {
			t.Errorf("%s: entries %v (%v)", name, n, rec.header)
		}
	}
}

// TestUpstreamTimingAllowOriginReplaced: an upstream's Timing-Allow-Origin
// (a `*`, or the request's Origin reflected) would let any page read the
// PoP's entries: the configured value replaces it, and without one it is
// removed.
func TestUpstreamTimingAllowOriginReplaced(t *testing.T) {
	for _, tao := range []string{"", "https://app.example"} {
		h := testHandler()
		h.tao = tao
		rec := newRecorder()
		_ = serve(t, h, rec, newRequest("GET", 2), func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Timing-Allow-Origin", "*")
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(200)
			return nil
		})
		got := rec.final()["Timing-Allow-Origin"]
		if tao == "" && got != nil || tao != "" && (len(got) != 1 || got[0] != tao) {
			t.Errorf("configured %q: sent %q", tao, got)
		}
	}
}
