package earlyhints

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// recorder records every header written (1xx included) with its Link
// fields at that moment.
type recorder struct {
	hdr     http.Header
	written []written
}

type written struct {
	status int
	links  []string
	csp    string
}

func (r *recorder) Header() http.Header { return r.hdr }
func (r *recorder) Write(p []byte) (int, error) {
	if len(r.written) == 0 || r.written[len(r.written)-1].status < 200 {
		r.WriteHeader(200)
	}
	return len(p), nil
}
func (r *recorder) WriteHeader(s int) {
	r.written = append(r.written, written{s, slices.Clone(r.hdr["Link"]), r.hdr.Get("Content-Security-Policy")})
}

func newHandler(t *testing.T, h *Handler) *Handler {
	t.Helper()
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	h.learn = h.Learn == nil || *h.Learn
	for _, l := range h.Links {
		v, _ := l.value()
		h.manual = append(h.manual, v)
	}
	h.origins = h.AllowOrigin
	h.store = newStore(100, 1<<20, time.Hour)
	return h
}

// origin answers like an upstream page: optional 103 links, then its
// final header.
type origin struct {
	early       []string
	earlyHeader http.Header // the 103's fields besides Link
	header      http.Header
	status      int
}

func (o *origin) ServeHTTP(w http.ResponseWriter, _ *http.Request) error {
	if len(o.early) > 0 {
		w.Header()["Link"] = o.early
		for k, v := range o.earlyHeader {
			w.Header()[k] = v
		}
		w.WriteHeader(http.StatusEarlyHints)
		delete(w.Header(), "Link")
		for k := range o.earlyHeader {
			delete(w.Header(), k)
		}
	}
	for k, v := range o.header {
		w.Header()[k] = v
	}
	w.WriteHeader(o.status)
	_, err := w.Write([]byte("<html>"))
	return err
}

func page(links ...string) *origin {
	return &origin{status: 200, header: http.Header{"Content-Type": {"text/html"}, "Link": links}}
}

func navigation(path string, proto int) *http.Request {
	r := httptest.NewRequest("GET", "https://example.com"+path, nil)
	r.TLS = &tls.ConnectionState{}
	r.ProtoMajor = proto
	r.Header.Set("Sec-Fetch-Mode", "navigate")
	return r
}

func serve(t *testing.T, h *Handler, r *http.Request, next caddyhttp.Handler) *recorder {
	t.Helper()
	rec := &recorder{hdr: http.Header{}}
	if err := h.ServeHTTP(rec, r, next); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestHandlerLearnsThenHints: the first navigation learns (no 103), the
// second gets a 103 with the same-site links first, and its final header
// has the origin's Link fields only.
func TestHandlerLearnsThenHints(t *testing.T) {
	h := newHandler(t, &Handler{})
	o := page("</app.css>; rel=preload; as=style", "<https://evil.example/x.js>; rel=preload; as=script",
		"<https://example.com/abs.js>; rel=modulepreload", "</next>; rel=prefetch")
	first := serve(t, h, navigation("/p?q=1", 2), o)
	if len(first.written) != 1 || first.written[0].status != 200 {
		t.Fatalf("first navigation: %+v; want only the 200", first.written)
	}
	second := serve(t, h, navigation("/p?other", 2), o)
	want := []string{"</app.css>; rel=preload; as=style", "<https://example.com/abs.js>; rel=modulepreload"}
	if len(second.written) != 2 || second.written[0].status != 103 || !slices.Equal(second.written[0].links, want) {
		t.Fatalf("second navigation: %+v; want a 103 with %q", second.written, want)
	}
	if !slices.Equal(second.written[1].links, o.header["Link"]) {
		t.Errorf("final Link %q, want the origin's %q", second.written[1].links, o.header["Link"])
	}
}

// TestHandlerHintsOnlyNavigationsOverH2AndH3: no 103 for HTTP/1.1 (unless
// http1 on), for a non-navigation GET (unless hint_on any), or a POST.
func TestHandlerHintsOnlyNavigationsOverH2AndH3(t *testing.T) {
	o := page("</app.css>; rel=preload; as=style")
	for _, tc := range []struct {
		name  string
		h     *Handler
		r     func() *http.Request
		hints bool
	}{
		{"h2 navigation", &Handler{}, func() *http.Request { return navigation("/", 2) }, true},
		{"h3 navigation", &Handler{}, func() *http.Request { return navigation("/", 3) }, true},
		{"h1 navigation", &Handler{}, func() *http.Request { return navigation("/", 1) }, false},
		{"h1 navigation http1 on", &Handler{HTTP1: true}, func() *http.Request { return navigation("/", 1) }, true},
		{"h2 fetch", &Handler{}, func() *http.Request {
			r := navigation("/", 2)
			r.Header.Set("Sec-Fetch-Mode", "cors")
			return r
		}, false},
		{"h2 fetch hint_on any", &Handler{HintOn: HintAny}, func() *http.Request {
			r := navigation("/", 2)
			r.Header.Del("Sec-Fetch-Mode")
			return r
		}, true},
		{"h2 POST", &Handler{}, func() *http.Request {
			r := navigation("/", 2)
			r.Method = "POST"
			return r
		}, false},
	} {
		h := newHandler(t, tc.h)
		h.store.put("example.com /", []string{"</app.css>; rel=preload; as=style"})
		rec := serve(t, h, tc.r(), o)
		if got := rec.written[0].status == 103; got != tc.hints {
			t.Errorf("%s: hinted %v, want %v (%+v)", tc.name, got, tc.hints, rec.written)
		}
	}
}

// TestHandlerNeverLearnsPerUser: Set-Cookie, private, non-HTML and error
// pages teach nothing; a later public page without links forgets.
func TestHandlerNeverLearnsPerUser(t *testing.T) {
	h := newHandler(t, &Handler{})
	for _, o := range []*origin{
		{status: 200, header: http.Header{"Content-Type": {"text/html"}, "Set-Cookie": {"s=1"}, "Link": {"</u/1.js>; rel=preload"}}},
		{status: 200, header: http.Header{"Content-Type": {"text/html"}, "Cache-Control": {"private"}, "Link": {"</u/1.js>; rel=preload"}}},
		{status: 200, header: http.Header{"Content-Type": {"application/json"}, "Link": {"</u/1.js>; rel=preload"}}},
		{status: 500, header: http.Header{"Content-Type": {"text/html"}, "Link": {"</u/1.js>; rel=preload"}}},
		{status: 200, early: []string{"</u/1.js>; rel=preload"}, header: http.Header{"Content-Type": {"text/html"}, "Cache-Control": {"no-store"}}},
	} {
		serve(t, h, navigation("/", 2), o)
		if h.store.len() != 0 {
			t.Fatalf("learned from %+v", o)
		}
	}
	serve(t, h, navigation("/", 2), page("</a.js>; rel=preload"))
	serve(t, h, navigation("/", 2), page())
	if h.store.len() != 0 {
		t.Fatal("a public page without links did not forget the old ones")
	}
}

// TestHandlerAllowOrigin: a cross-site link is learned only from an
// allowed origin.
func TestHandlerAllowOrigin(t *testing.T) {
	h := newHandler(t, &Handler{AllowOrigin: []string{"https://cdn.example.net"}})
	serve(t, h, navigation("/", 2), page("<https://cdn.example.net/a.js>; rel=preload; as=script",
		"<https://other.example.net/b.js>; rel=preload", "<http://example.com/c.js>; rel=preload", "<//cdn.example.net/d.js>; rel=preload"))
	want := []string{"<https://cdn.example.net/a.js>; rel=preload; as=script", "<//cdn.example.net/d.js>; rel=preload"}
	if got := h.store.getString("example.com /"); !slices.Equal(got, want) {
		t.Fatalf("learned %q, want %q", got, want)
	}
}

// TestHandlerOriginEarlyHints: the origin's own 103 links are learned; a
// later origin 103 with nothing new is passed on unchanged (with its other
// fields), one with a new link is passed on with that link alone.
func TestHandlerOriginEarlyHints(t *testing.T) {
	h := newHandler(t, &Handler{})
	o := &origin{status: 200, early: []string{"</e.js>; rel=preload; as=script"}, header: http.Header{"Content-Type": {"text/html"}}}
	o.earlyHeader = http.Header{"Content-Security-Policy": {"script-src 'self'"}}
	first := serve(t, h, navigation("/", 2), o)
	if len(first.written) != 2 || first.written[0].status != 103 {
		t.Fatalf("the origin's 103 was not passed on: %+v", first.written)
	}
	second := serve(t, h, navigation("/", 2), o)
	if len(second.written) != 3 || second.written[0].status != 103 || second.written[1].status != 103 ||
		!slices.Equal(second.written[1].links, o.early) || second.written[1].csp != "script-src 'self'" {
		t.Fatalf("second: %+v; want the PoP's 103, the origin's unchanged (with its CSP) and the 200", second.written)
	}
	o.early = append(o.early, "</new.css>; rel=preload; as=style")
	third := serve(t, h, navigation("/", 2), o)
	if len(third.written) != 3 || third.written[1].csp != "script-src 'self'" || !slices.Equal(third.written[1].links, []string{"</new.css>; rel=preload; as=style"}) {
		t.Fatalf("third: %+v; want the origin's 103 with its new link alone", third.written)
	}
}

// TestHandlerManualLinks: configured links are hinted on the first
// navigation, before learned ones, without duplicates.
func TestHandlerManualLinks(t *testing.T) {
	h := newHandler(t, &Handler{Links: []Link{{URL: "/app.css", Rel: "preload", As: "style"}}})
	rec := serve(t, h, navigation("/", 2), page("</app.css>; rel=preload; as=style", "</b.js>; rel=preload"))
	if rec.written[0].status != 103 || !slices.Equal(rec.written[0].links, []string{"</app.css>; rel=preload; as=style"}) {
		t.Fatalf("first: %+v", rec.written)
	}
	rec = serve(t, h, navigation("/", 2), page())
	if !slices.Equal(rec.written[0].links, []string{"</app.css>; rel=preload; as=style", "</b.js>; rel=preload"}) {
		t.Fatalf("second: %+v", rec.written)
	}
}

// TestLinkConfigCannotInject: configured link text that would add a field
// or a parameter is refused.
func TestLinkConfigCannotInject(t *testing.T) {
	for _, l := range []Link{
		{URL: "/a.js>; rel=preload\r\nSet-Cookie: x", Rel: "preload"},
		{URL: "/a.js", Rel: "preload\r\nX: y"},
		{URL: "/a.js", Rel: "preload", As: "script\nX: y"},
		{URL: "/a.js", Rel: "preload", As: "script; crossorigin"},
		{URL: "/a b.js", Rel: "preload"},
		{URL: "/a.js", Rel: "stylesheet"},
		{URL: "", Rel: "preload"},
	} {
		if _, err := l.value(); err == nil {
			t.Errorf("accepted %+v", l)
		}
	}
}

// TestWriterLearnsOnEveryPath: the final header is seen whether the
// upstream writes it, writes a body first, or flushes first.
func TestWriterLearnsOnEveryPath(t *testing.T) {
	for name, write := range map[string]func(http.ResponseWriter){
		"Write": func(w http.ResponseWriter) { w.Write([]byte("x")) },
		"Flush": func(w http.ResponseWriter) { http.NewResponseController(w).Flush() },
	} {
		h := newHandler(t, &Handler{})
		rec := &recorder{hdr: http.Header{}}
		fw := &flushRecorder{rec}
		h.ServeHTTP(fw, navigation("/", 2), caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Link", "</a.js>; rel=preload")
			write(w)
			return nil
		}))
		if h.store.len() != 1 {
			t.Errorf("%s: nothing learned", name)
		}
	}
}

type flushRecorder struct{ *recorder }

func (f *flushRecorder) Flush() {
	if len(f.written) == 0 {
		f.WriteHeader(200)
	}
}

// TestHandlerSameOriginDefaultPort: a link that spells out its scheme's
// default port names the same origin as one that leaves it out.
func TestHandlerSameOriginDefaultPort(t *testing.T) {
	h := newHandler(t, &Handler{AllowOrigin: []string{"https://cdn.example.net"}})
	serve(t, h, navigation("/", 2), page("<https://cdn.example.net:443/a.js>; rel=preload", "<https://example.com:443/b.js>; rel=preload",
		"<https://cdn.example.net:8443/c.js>; rel=preload"))
	want := []string{"<https://cdn.example.net:443/a.js>; rel=preload", "<https://example.com:443/b.js>; rel=preload"}
	if got := h.store.getString("example.com /"); !slices.Equal(got, want) {
		t.Fatalf("learned %q, want %q", got, want)
	}
}
