package substitute

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// provision returns h provisioned and validated, or fails the test.
func provision(t testing.TB, h *Handler) *Handler {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := provisionValidate(ctx, h); err != nil {
		t.Fatal(err)
	}
	return h
}

// provisionValidate provisions h in ctx and validates it, as Caddy loads a
// handler.
func provisionValidate(ctx caddy.Context, h *Handler) error {
	if err := h.Provision(ctx); err != nil {
		return err
	}
	return h.Validate()
}

func request(method, target string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	repl := caddy.NewReplacer()
	repl.Set("http.request.uri.path", r.URL.Path)
	return r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl))
}

// serve runs h in front of next and returns the recorded response.
func serve(t testing.TB, h *Handler, r *http.Request, next http.HandlerFunc) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	if err := h.ServeHTTP(rec, r, asCaddy(next)); err != nil {
		var he caddyhttp.HandlerError
		if errors.As(err, &he) {
			rec.Code = he.StatusCode
			return rec
		}
		t.Fatal(err)
	}
	return rec
}

// asCaddy makes next the handler after substitute.
func asCaddy(next http.HandlerFunc) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		next(w, r)
		return nil
	})
}

// origin answers body with the given headers, writing it in chunks of at
// most chunk bytes, as often as it is called.
func origin(status int, hdr map[string]string, body []byte, chunk int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		for p := body; len(p) > 0; {
			n := min(chunk, len(p))
			_, _ = w.Write(p[:n])
			p = p[n:]
		}
	}
}

func basicHandler(t testing.TB) *Handler {
	return provision(t, &Handler{Rules: []Rule{
		{Find: "origin.example", Replace: "edge.example"},
		{Find: `id-(\d+)`, Regex: true, Replace: "n$1"},
	}})
}

func TestSubstitutesAndAdjustsHeaders(t *testing.T) {
	h := basicHandler(t)
	body := []byte(`<a href="https://origin.example/x">id-42</a>`)
	rec := serve(t, h, request("GET", "/"), origin(200, map[string]string{
		"Content-Type":   "text/html; charset=utf-8",
		"Content-Length": "46",
		"Etag":           `"abc"`,
		"Last-Modified":  "Mon, 02 Jan 2006 15:04:05 GMT",
		"Accept-Ranges":  "bytes",
	}, body, 3))
	if got, want := rec.Body.String(), `<a href="https://edge.example/x">n42</a>`; got != want {
		t.Errorf("body %q, want %q", got, want)
	}
	res := rec.Result()
	if v := res.Header.Get("Content-Length"); v != "" {
		t.Errorf("Content-Length %q kept", v)
	}
	if v := res.Header.Get("Etag"); v != `W/"abc"` {
		t.Errorf("ETag %q, want W/\"abc\"", v)
	}
	if v := res.Header.Get("Last-Modified"); v == "" {
		t.Error("Last-Modified dropped")
	}
	if v := res.Header.Get("Accept-Ranges"); v != "" {
		t.Errorf("Accept-Ranges %q kept on a substituted body", v)
	}
}

func TestPassesUntouched(t *testing.T) {
	body := []byte("origin.example")
	cases := []struct {
		name   string
		h      *Handler
		method string
		status int
		ctype  string
		enc    string
	}{
		{"other type", &Handler{}, "GET", 200, "video/mp4", ""},
		{"no type", &Handler{}, "GET", 200, "", ""},
		{"status filter", &Handler{Status: []int{2}}, "GET", 404, "text/html", ""},
		{"CONNECT", &Handler{}, "CONNECT", 200, "text/html", ""},
		{"204", &Handler{}, "GET", 204, "text/html", ""},
		{"304", &Handler{}, "GET", 304, "text/html", ""},
		{"unknown encoding", &Handler{}, "GET", 200, "text/html", "compress"},
		{"two encodings", &Handler{}, "GET", 200, "text/html", "gzip, br"},
		{"types list", &Handler{Types: []string{"text/css"}}, "GET", 200, "text/html", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.h.Rules = []Rule{{Find: "origin", Replace: "edge"}}
			h := provision(t, c.h)
			hdr := map[string]string{"Content-Length": "14", "Etag": `"x"`}
			if c.ctype != "" {
				hdr["Content-Type"] = c.ctype
			}
			if c.enc != "" {
				hdr["Content-Encoding"] = c.enc
			}
			b := body
			if !bodyAllowed(c.status) {
				b = nil
			}
			rec := serve(t, h, request(c.method, "/"), origin(c.status, hdr, b, 5))
			if rec.Code != c.status {
				t.Errorf("status %d, want %d", rec.Code, c.status)
			}
			if got := rec.Body.String(); got != string(b) {
				t.Errorf("body %q, want it untouched %q", got, b)
			}
			etag := `"x"`
			if c.status == http.StatusNotModified {
				etag = `W/"x"` // the validator a substituted 200 would carry
			}
			if rec.Header().Get("Content-Length") != "14" || rec.Header().Get("Etag") != etag {
				t.Errorf("headers changed: %v", rec.Header())
			}
		})
	}
}

func TestTypesAndStatus(t *testing.T) {
	h := provision(t, &Handler{
		Rules:  []Rule{{Find: "a", Replace: "b"}},
		Types:  []string{"text/*", "application/JSON"},
		Status: []int{200, 4},
	})
	for _, c := range []struct {
		ctype  string
		status int
		want   string
	}{
		{"text/css", 200, "b"},
		{"TEXT/PLAIN ; charset=latin1", 404, "b"},
		{"application/json;charset=utf-8", 200, "b"},
		{"application/json", 500, "a"},
		{"application/jsonx", 200, "a"},
		{"text/html", 201, "a"},
	} {
		rec := serve(t, h, request("GET", "/"), origin(c.status, map[string]string{"Content-Type": c.ctype}, []byte("a"), 1))
		if got := rec.Body.String(); got != c.want {
			t.Errorf("%s %d: body %q, want %q", c.ctype, c.status, got, c.want)
		}
	}
}

func compress(t testing.TB, enc string, b []byte) []byte {
	var buf bytes.Buffer
	var w io.WriteCloser
	switch enc {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "deflate":
		w = zlib.NewWriter(&buf)
	case "raw-deflate":
		w, _ = flate.NewWriter(&buf, 5)
	case "br":
		w = brotli.NewWriter(&buf)
	case "zstd":
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecodesUpstreamEncodings(t *testing.T) {
	h := basicHandler(t)
	plain := bytes.Repeat([]byte("see https://origin.example/id-7 now\n"), 5000)
	want := bytes.ReplaceAll(plain, []byte("origin.example/id-7"), []byte("edge.example/n7"))
	for _, enc := range []string{"gzip", "deflate", "raw-deflate", "br", "zstd"} {
		for _, chunk := range []int{1, 1000, 1 << 20} {
			if chunk == 1 && testing.Short() {
				continue
			}
			header := enc
			if enc == "raw-deflate" {
				header = "deflate"
			}
			rec := serve(t, h, request("GET", "/"), origin(200, map[string]string{
				"Content-Type": "text/plain", "Content-Encoding": header,
			}, compress(t, enc, plain), chunk))
			if rec.Header().Get("Content-Encoding") != "" {
				t.Errorf("%s/%d: Content-Encoding kept", enc, chunk)
			}
			if !bytes.Equal(rec.Body.Bytes(), want) {
				t.Errorf("%s/%d: body differs (%d bytes, want %d)", enc, chunk, rec.Body.Len(), len(want))
			}
		}
	}
}

func TestCorruptEncodingEndsResponse(t *testing.T) {
	h := basicHandler(t)
	before := testutil.ToFloat64(metrics.decodeFailures)
	o := serveChunks(t, h, map[string]string{"Content-Type": "text/plain", "Content-Encoding": "gzip"},
		[][]byte{[]byte("this is"), []byte(" not gzip at all")})
	if len(o.body) != 0 || !o.aborted {
		t.Errorf("corrupt gzip produced %q, aborted %v", o.body, o.aborted)
	}
	if testutil.ToFloat64(metrics.decodeFailures) != before+1 {
		t.Error("decode failure not counted")
	}
}

// goneClient is a client that went away: every write fails.
type goneClient struct{ hdr http.Header }

func (g *goneClient) Header() http.Header       { return g.hdr }
func (g *goneClient) Write([]byte) (int, error) { return 0, errors.New("client gone") }
func (g *goneClient) WriteHeader(int)           {}

func TestClientGoneIsNotADecodeFailure(t *testing.T) {
	h := basicHandler(t)
	// More than the 64 KiB output buffer, so that writes reach the client.
	plain := bytes.Repeat([]byte("see https://origin.example/id-7 now\n"), 10000)
	for _, enc := range []string{"gzip", "deflate", "br", "zstd"} {
		before := testutil.ToFloat64(metrics.decodeFailures)
		next := origin(200, map[string]string{"Content-Type": "text/plain", "Content-Encoding": enc}, compress(t, enc, plain), 32<<10)
		if err := h.ServeHTTP(&goneClient{hdr: http.Header{}}, request("GET", "/"), asCaddy(next)); err != nil {
			t.Fatalf("%s: %v", enc, err)
		}
		if testutil.ToFloat64(metrics.decodeFailures) != before {
			t.Errorf("%s: a client that went away was counted as an upstream decode failure", enc)
		}
	}
}

// readFromOrigin writes its body the way file_server does: through the
// writer's ReadFrom.
func readFromOrigin(ctype string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Length", "999")
		if _, ok := w.(io.ReaderFrom); !ok {
			panic("substitute's writer must implement io.ReaderFrom")
		}
		_, _ = io.Copy(w, bytes.NewReader(body))
	}
}

func TestReadFromPath(t *testing.T) {
	h := basicHandler(t)
	rec := serve(t, h, request("GET", "/"), readFromOrigin("text/html", []byte("x origin.example id-1")))
	if got := rec.Body.String(); got != "x edge.example n1" {
		t.Errorf("ReadFrom body %q", got)
	}
	rec = serve(t, h, request("GET", "/"), readFromOrigin("image/png", []byte("origin.example")))
	if got := rec.Body.String(); got != "origin.example" || rec.Header().Get("Content-Length") != "999" {
		t.Errorf("ReadFrom pass-through changed the response: %q %v", got, rec.Header())
	}
}

// sizeRecorder records the size of every write that reaches the client.
type sizeRecorder struct {
	*httptest.ResponseRecorder
	sizes []int
}

func (r *sizeRecorder) Write(p []byte) (int, error) {
	r.sizes = append(r.sizes, len(p))
	return r.ResponseRecorder.Write(p)
}

// TestOutputGrowsForLargeBodies: a body's first 256 KiB reach
// the client in writes of at most 64 KiB, the rest in writes of up to
// 256 KiB; the bytes are the same, and the next response (the pooled
// writer) starts small again.
func TestOutputGrowsForLargeBodies(t *testing.T) {
	h := basicHandler(t)
	line := "<p>origin.example id-7 some text to carry the matches along.</p>\n"
	for _, size := range []int{3 << 20, 200 << 10} {
		body := []byte(strings.Repeat(line, size/len(line)))
		rec := &sizeRecorder{ResponseRecorder: httptest.NewRecorder()}
		if err := h.ServeHTTP(rec, request("GET", "/"), asCaddy(origin(200, map[string]string{"Content-Type": "text/html"}, body, 32<<10))); err != nil {
			t.Fatal(err)
		}
		want := strings.ReplaceAll(strings.ReplaceAll(string(body), "origin.example", "edge.example"), "id-7", "n7")
		if rec.Body.String() != want {
			t.Fatalf("%d-byte body: output differs from the substituted body", size)
		}
		sent, big := 0, 0
		for _, n := range rec.sizes {
			if sent < 256<<10 && n > 64<<10 || n > 256<<10 {
				t.Fatalf("%d-byte body: a write of %d bytes after %d sent (sizes %v)", size, n, sent, rec.sizes)
			}
			if n > 64<<10 {
				big++
			}
			sent += n
		}
		if wantBig := size == 3<<20; (big > 0) != wantBig {
			t.Errorf("%d-byte body: %d writes larger than 64 KiB (sizes %v)", size, big, rec.sizes)
		}
	}
}

// flushRecorder records what reached the client at each Flush.
type flushRecorder struct {
	*httptest.ResponseRecorder
	atFlush []string
}

func (f *flushRecorder) Flush() {
	f.atFlush = append(f.atFlush, f.Body.String())
	f.ResponseRecorder.Flush()
}

func TestFlushSendsEverythingThatCannotMatch(t *testing.T) {
	for _, enc := range []string{"", "gzip"} {
		t.Run("enc="+enc, func(t *testing.T) {
			h := provision(t, &Handler{Types: []string{"text/event-stream"}, Rules: []Rule{{Find: "origin.example", Replace: "edge.example"}}})
			rec := &flushRecorder{ResponseRecorder: httptest.NewRecorder()}
			events := []string{"data: one origin.ex", "ample\n\n", "data: two\n\n"}
			var zw *gzip.Writer
			var out bytes.Buffer
			next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("Content-Type", "text/event-stream") // not held (see output)
				if enc != "" {
					w.Header().Set("Content-Encoding", enc)
					zw = gzip.NewWriter(&out)
				}
				w.WriteHeader(200)
				rc := http.NewResponseController(w)
				for _, e := range events {
					if zw != nil {
						_, _ = zw.Write([]byte(e))
						_ = zw.Flush()
						_, _ = w.Write(out.Bytes())
						out.Reset()
					} else {
						_, _ = w.Write([]byte(e))
					}
					if err := rc.Flush(); err != nil {
						return err
					}
				}
				if zw != nil { // a complete stream: a cut one aborts
					_ = zw.Close()
					_, _ = w.Write(out.Bytes())
				}
				return nil
			})
			if err := h.ServeHTTP(rec, request("GET", "/"), next); err != nil {
				t.Fatal(err)
			}
			want := []string{"data: one ", "data: one edge.example\n\n", "data: one edge.example\n\ndata: two\n\n"}
			if strings.Join(rec.atFlush, "|") != strings.Join(want, "|") {
				t.Errorf("at each flush the client had\n%q\nwant\n%q", rec.atFlush, want)
			}
		})
	}
}

func TestPlaceholdersPerRequest(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{
		{Find: "PATH", Replace: "[{http.request.uri.path}]"},
		{Find: `(x)`, Regex: true, Replace: "$1{unknown.placeholder}"},
	}})
	for _, p := range []string{"/a", "/b$1", "/c"} {
		rec := serve(t, h, request("GET", p), origin(200, map[string]string{"Content-Type": "text/plain"}, []byte("PATH x PATH"), 2))
		want := "[" + p + "] x{unknown.placeholder} [" + p + "]"
		if got := rec.Body.String(); got != want {
			t.Errorf("%s: body %q, want %q", p, got, want)
		}
	}
}

func TestOnceAndPriority(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{
		{Find: "a", Replace: "1", Once: true},
		{Find: "ab", Replace: "2"},
		{Find: "a", Replace: "3"},
	}})
	rec := serve(t, h, request("GET", "/"), origin(200, map[string]string{"Content-Type": "text/plain"}, []byte("a a ab a"), 1))
	if got, want := rec.Body.String(), "1 3 2 3"; got != want {
		t.Errorf("longest: %q, want %q", got, want)
	}
	h = provision(t, &Handler{Priority: "first", Rules: []Rule{
		{Find: "a", Replace: "1"},
		{Find: "ab", Replace: "2"},
	}})
	rec = serve(t, h, request("GET", "/"), origin(200, map[string]string{"Content-Type": "text/plain"}, []byte("ab"), 1))
	if got, want := rec.Body.String(), "1b"; got != want {
		t.Errorf("first: %q, want %q", got, want)
	}
}

// rangeOrigin answers a Range request with a 206 of the first 5 bytes, and
// counts its calls.
func rangeOrigin(ctype string, body string, calls *int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		*calls++
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Accept-Ranges", "bytes")
		if r.Header.Get("Range") != "" {
			w.Header().Set("Content-Range", "bytes 0-4/"+strings.Repeat("9", 2))
			w.WriteHeader(206)
			_, _ = io.WriteString(w, body[:5])
			return
		}
		w.Header().Set("X-Full", "yes")
		_, _ = io.WriteString(w, body)
	}
}

func TestRangeOfSubstitutableBodyIsRetriedWhole(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{{Find: "origin", Replace: "edge"}}})
	for _, ctype := range []string{"text/html", "multipart/byteranges; boundary=x"} {
		calls := 0
		r := request("GET", "/")
		r.Header.Set("Range", "bytes=0-4")
		r.Header.Set("If-Range", `"v1"`)
		rec := httptest.NewRecorder()
		rec.Header().Set("X-Outer", "kept")
		err := h.ServeHTTP(rec, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("X-Inner", "once") // must not be doubled by the retry
			w.Header().Add("Vary", "Inner")
			rangeOrigin(ctype, "origin body", &calls)(w, r)
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		if calls != 2 {
			t.Errorf("%s: origin called %d times, want 2", ctype, calls)
		}
		wantBody := "edge body"
		if strings.HasPrefix(ctype, "multipart") {
			wantBody = "origin body" // the retry's 200 is not a substitutable type
		}
		if rec.Code != 200 || rec.Body.String() != wantBody {
			t.Errorf("%s: got %d %q, want 200 %q", ctype, rec.Code, rec.Body.String(), wantBody)
		}
		if rec.Header().Get("X-Outer") != "kept" || len(rec.Header()["Vary"]) != 1 || rec.Header().Get("Content-Range") != "" || rec.Header().Get("X-Full") != "yes" {
			t.Errorf("%s: headers after retry: %v", ctype, rec.Header())
		}
	}
}

func TestRangeOfOtherTypesKeeps206(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{{Find: "origin", Replace: "edge"}}})
	calls := 0
	r := request("GET", "/")
	r.Header.Set("Range", "bytes=0-4")
	rec := serve(t, h, r, rangeOrigin("video/mp4", "origin body", &calls))
	if calls != 1 || rec.Code != 206 || rec.Body.String() != "origi" || rec.Header().Get("Content-Range") == "" {
		t.Errorf("video range: calls %d, %d %q %v", calls, rec.Code, rec.Body.String(), rec.Header())
	}
}

func TestPartialSubstitutableBodyNeverLeaks(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{{Find: "origin", Replace: "edge"}}})
	calls := 0
	// A POST cannot be sent again; an origin answering 206 anyway must not
	// get its fragment through.
	r := request("POST", "/")
	r.Header.Set("Range", "bytes=0-4")
	rec := serve(t, h, r, rangeOrigin("text/html", "origin body", &calls))
	if rec.Code != http.StatusBadGateway || rec.Body.Len() != 0 {
		t.Errorf("got %d %q, want 502 and no body", rec.Code, rec.Body.String())
	}
	// The 502 describes no representation: none of the 206's fields (its
	// Content-Length would frame an empty body as a truncated one).
	for _, name := range []string{"Content-Range", "Content-Type", "Accept-Ranges"} {
		if v, ok := rec.Header()[name]; ok {
			t.Errorf("the 502 carries the 206's %s: %q", name, v)
		}
	}
}

func TestMemo(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{
		{Find: "origin", Replace: "edge"},
		{Find: "unused", Replace: "x"},
	}})
	hits := func() float64 { return testutil.ToFloat64(metrics.memoHits) }
	get := func(path, etag, body string) string {
		hdr := map[string]string{"Content-Type": "text/html", "Etag": etag}
		return serve(t, h, request("GET", path), origin(200, hdr, []byte(body), 3)).Body.String()
	}
	n0 := hits()
	first := get("/m?q=1", `"v1"`, "plain page")
	second := get("/m?q=1", `"v1"`, "plain page")
	if n := hits(); n != n0+1 {
		t.Errorf("second identical response: unscanned hits %v, want %v", n, n0+1)
	}
	if first != second || second != "plain page" {
		t.Errorf("memo changed output: %q then %q", first, second)
	}
	// A new ETag is a miss: the new body is fully scanned.
	if got := get("/m?q=1", `"v2"`, "origin unused"); got != "edge x" {
		t.Errorf("after ETag change: %q", got)
	}
	// Weak ETags and other queries are never reused.
	n1 := hits()
	get("/w", `W/"v1"`, "plain")
	get("/w", `W/"v1"`, "plain")
	get("/m?q=2", `"v1"`, "origin")
	if n := hits(); n != n1 {
		t.Error("memo used for a weak ETag or another query")
	}
	off := provision(t, &Handler{Memo: MemoOff, Rules: []Rule{{Find: "a", Replace: "b"}}})
	if off.memo != nil {
		t.Error("memo off still allocates a memo")
	}
}

// TestMemoRemembersOnlyUnmatched: a body that some rule matched is scanned
// in full every time (the memo counts no hit and keeps no entry for it), and
// a matching body under a new ETag makes the memo forget the resource.
func TestMemoRemembersOnlyUnmatched(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{
		{Find: "origin", Replace: "edge"},
		{Find: "unused", Replace: "x"},
	}})
	get := func(path, etag, body string) string {
		hdr := map[string]string{"Content-Type": "text/html", "Etag": etag}
		return serve(t, h, request("GET", path), origin(200, hdr, []byte(body), 3)).Body.String()
	}
	hits, misses := testutil.ToFloat64(metrics.memoHits), testutil.ToFloat64(metrics.memoMisses)
	for range 3 {
		if got := get("/r", `"v1"`, "origin page"); got != "edge page" {
			t.Fatalf("matching body: %q", got)
		}
	}
	if n := testutil.ToFloat64(metrics.memoHits); n != hits {
		t.Errorf("memo hits %v after a matching body came back, want %v (none)", n, hits)
	}
	if n := testutil.ToFloat64(metrics.memoMisses); n != misses+3 {
		t.Errorf("memo misses %v, want %v: a matching body is scanned in full each time", n, misses+3)
	}
	if h.memo.len() != 0 {
		t.Errorf("memo holds %d entries for a matching body, want 0", h.memo.len())
	}
	// Unmatched, remembered; then matched under a new ETag, forgotten.
	get("/r", `"v2"`, "plain page")
	if h.memo.len() != 1 {
		t.Fatalf("memo holds %d entries after an unmatched body, want 1", h.memo.len())
	}
	if got := get("/r", `"v3"`, "origin again"); got != "edge again" || h.memo.len() != 0 {
		t.Errorf("matching body under a new ETag: %q, memo holds %d entries, want it forgotten", got, h.memo.len())
	}
}

func TestMemoIsBounded(t *testing.T) {
	m := newMemo(3)
	for i := range 10 {
		m.store(m.digest("GET", "h", "/"+string(rune('a'+i)), ""), `"e"`)
	}
	if m.len() != 3 {
		t.Errorf("memo holds %d entries, bound 3", m.len())
	}
	if !m.unmatched(m.digest("GET", "h", "/j", ""), `"e"`) {
		t.Error("latest entry not found")
	}
	if m.unmatched(m.digest("GET", "h", "/j", ""), `"f"`) {
		t.Error("found with another ETag")
	}
}

func TestValidateRefuses(t *testing.T) {
	for _, c := range []struct {
		h    Handler
		want string
	}{
		{Handler{}, "no rules"},
		{Handler{Rules: []Rule{{Find: "a"}, {Find: "(", Regex: true}}}, "rule 2"},
		{Handler{Rules: []Rule{{Find: "a*", Regex: true}}}, "rule 1"},
		{Handler{Rules: []Rule{{Find: ""}}}, "rule 1"},
		{Handler{Rules: []Rule{{Find: "a"}}, Priority: "shortest"}, "priority"},
		{Handler{Rules: []Rule{{Find: "a"}}, MaxMatch: 10}, "max_match"},
		{Handler{Rules: []Rule{{Find: "a"}}, Memo: -5}, "memo"},
		{Handler{Rules: []Rule{{Find: "a"}}, Types: []string{"html"}}, "type"},
		{Handler{Rules: []Rule{{Find: "a"}}, Status: []int{700}}, "status"},
		{Handler{Rules: []Rule{{Find: strings.Repeat("a", 100)}}, MaxMatch: 64}, "longer than max_match"},
	} {
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		err := c.h.Provision(ctx)
		if err == nil {
			err = c.h.Validate()
		}
		cancel()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "substitute: ") {
			t.Errorf("%+v: error %v, want one containing %q", c.h, err, c.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{{Find: "a", Replace: "b"}}})
	if h.MaxMatch != 16<<10 || h.Memo != DefaultMemo || h.Priority != "longest" || len(h.Types) != len(DefaultTypes) || h.memo == nil {
		t.Errorf("defaults not set: %+v", h)
	}
}

func TestMetricsSurviveReload(t *testing.T) {
	// Two handlers in one config, then a new config (new registry), as
	// a reload does: no duplicate-registration panic, counts carry on.
	provision(t, &Handler{Rules: []Rule{{Find: "a", Replace: "b"}}})
	provision(t, &Handler{Rules: []Rule{{Find: "c", Replace: "d"}}})
	reg := prometheus.NewPedanticRegistry()
	registerMetrics(reg)
	registerMetrics(reg)
	before := testutil.ToFloat64(metrics.substituted)
	h := basicHandler(t)
	serve(t, h, request("GET", "/"), origin(200, map[string]string{"Content-Type": "text/html"}, []byte("x"), 1))
	if testutil.ToFloat64(metrics.substituted) != before+1 {
		t.Error("substituted response not counted")
	}
	if n, err := testutil.GatherAndCount(reg, "caddy_substitute_responses_total"); err != nil || n == 0 {
		t.Errorf("responses_total not exported by the new registry: %d, %v", n, err)
	}
}
