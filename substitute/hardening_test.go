package substitute

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// heapAfterGC is the live heap once garbage is collected.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMemoEntryCostIsFixed: a memo entry must not keep the request's path
// and query (which share memory with the whole request line) alive, so a
// caller's unique 16 KB queries cost what short ones cost.
func TestMemoEntryCostIsFixed(t *testing.T) {
	const n = 1000
	perEntry := func(query func(i int) string) float64 {
		h := provision(t, &Handler{Rules: []Rule{{Find: "origin", Replace: "edge"}}})
		hdr := map[string]string{"Content-Type": "text/html", "Etag": `"v1"`}
		next := origin(200, hdr, []byte("plain page"), 64)
		before := heapAfterGC()
		for i := range n {
			serve(t, h, request("GET", "/p?"+query(i)), next)
		}
		after := heapAfterGC()
		if got := h.memo.len(); got != n {
			t.Fatalf("memo holds %d entries, want %d", got, n)
		}
		runtime.KeepAlive(h)
		return (float64(after) - float64(before)) / n
	}
	small := perEntry(func(i int) string { return fmt.Sprintf("q=%d", i) })
	huge := perEntry(func(i int) string { return fmt.Sprintf("q=%d&pad=%s", i, strings.Repeat("x", 16<<10)) })
	t.Logf("retained per entry: %.0f B with short queries, %.0f B with 16 KiB ones", small, huge)
	if huge > small+512 || huge > 2048 {
		t.Errorf("a memo entry with a 16 KiB query retains %.0f B (short query: %.0f B): must not depend on the request", huge, small)
	}
}

// TestMaxMatchGrowsOnDemand: max_match bounds what a response may hold
// back; a response that holds little must not allocate it up front.
func TestMaxMatchGrowsOnDemand(t *testing.T) {
	h := provision(t, &Handler{MaxMatch: 16 << 20, Rules: []Rule{
		{Find: "origin", Replace: "edge"},
		{Find: `<a [^>]*>`, Regex: true, Replace: "<a>"},
	}})
	hdr := map[string]string{"Content-Type": "text/html"}
	next := origin(200, hdr, []byte("<p>origin page</p>"), 5)
	const n = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		// A new pool each time: a response of a fresh writer, as after a GC.
		h.writers = new(sync.Pool)
		if got := serve(t, h, request("GET", "/"), next).Body.String(); got != "<p>edge page</p>" {
			t.Fatalf("body %q", got)
		}
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("allocated per small response with max_match 16MiB: %d B", per)
	if per > 256<<10 {
		t.Errorf("a 18-byte response allocated %d B with max_match 16MiB: the held-bytes buffer must grow as needed", per)
	}

	// A match as long as max_match still works, fed in small pieces.
	long := "<a " + strings.Repeat("x", 16<<20-4) + ">"
	body := []byte("head " + long + " origin tail")
	big := origin(200, hdr, body, 4096)
	if got := serve(t, h, request("GET", "/"), big).Body.String(); got != "head <a> edge tail" {
		t.Errorf("a match of max_match bytes: got %d bytes starting %.40q", len(got), got)
	}
	// One byte longer cannot match: passed through untouched.
	longer := "<a " + strings.Repeat("x", 16<<20-3) + ">"
	if got := serve(t, h, request("GET", "/"), origin(200, hdr, []byte(longer), 4096)).Body.String(); got != longer {
		t.Errorf("a candidate longer than max_match: got %d bytes, want it untouched", len(got))
	}
}

// writeRecorder records the size of every write that reaches the client
// and what it had at each Flush.
type writeRecorder struct {
	*httptest.ResponseRecorder
	writes  []int
	atFlush []int
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.writes = append(w.writes, len(p))
	return w.ResponseRecorder.Write(p)
}

func (w *writeRecorder) Flush() {
	w.atFlush = append(w.atFlush, w.Body.Len())
	w.ResponseRecorder.Flush()
}

// TestFirstWriteIsWorthCompressing: flushes after every small upstream read
// must not make the first write downstream small (encode decides from it
// whether to compress); once 4 KiB are out, flushes pass on again; SSE is
// never held.
func TestFirstWriteIsWorthCompressing(t *testing.T) {
	h := provision(t, &Handler{Types: []string{"text/html", "text/event-stream"}, Rules: []Rule{{Find: "origin", Replace: "edge"}}})
	run := func(ctype string, chunks int) *writeRecorder {
		rec := &writeRecorder{ResponseRecorder: httptest.NewRecorder()}
		next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Type", ctype)
			w.WriteHeader(200)
			for i := range chunks {
				_, _ = fmt.Fprintf(w, "<p>origin %03d %s</p>\n", i, strings.Repeat("x", 200))
				if err := http.NewResponseController(w).Flush(); err != nil {
					return err
				}
			}
			return nil
		})
		if err := h.ServeHTTP(rec, request("GET", "/"), next); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	rec := run("text/html", 40) // ~8.8 KB in 40 flushed writes
	if len(rec.writes) == 0 || rec.writes[0] < outFirstWrite {
		t.Errorf("first write downstream %v bytes, want at least %d (writes %v)", rec.writes, outFirstWrite, rec.writes)
	}
	if n := len(rec.atFlush); n < 10 {
		t.Errorf("flushes after the first 4 KiB were not passed on: %d flushes", n)
	}
	if !strings.Contains(rec.Body.String(), "<p>edge 039 ") || strings.Contains(rec.Body.String(), "origin") {
		t.Errorf("body not substituted: %.60q", rec.Body.String())
	}
	// A body shorter than 4 KiB goes out whole, in one write, at its end.
	if rec := run("text/html", 3); len(rec.writes) != 1 || rec.writes[0] != rec.Body.Len() {
		t.Errorf("short body: writes %v, want one of %d bytes", rec.writes, rec.Body.Len())
	}
	// Server-sent events: every flush passes on at once.
	if rec := run("text/event-stream", 3); len(rec.atFlush) != 3 || rec.atFlush[0] == 0 {
		t.Errorf("SSE held: client had %v bytes at each flush", rec.atFlush)
	}
}

func TestWeakETagAndIfNoneMatch(t *testing.T) {
	for _, c := range []struct {
		etag string
		enc  encoding
		want string
	}{
		{`"abc-zstd"`, encZstd, `W/"abc"`},
		{`"abc-zstd"`, identity, `W/"abc-zstd"`}, // not the body's coding: the origin's own tag
		{`"abc-gzip"`, encGzip, `W/"abc"`},
		{`"abc-br"`, encBrotli, `W/"abc"`},
		{`"abc-deflate"`, encDeflate, `W/"abc"`},
		{`"-gzip"`, encGzip, `W/"-gzip"`},
		{`"abc"`, encGzip, `W/"abc"`},
	} {
		if got := weakETag(c.etag, c.enc); got != c.want {
			t.Errorf("weakETag(%s, %d) = %s, want %s", c.etag, c.enc, got, c.want)
		}
	}
	for _, c := range []struct {
		inm  []string
		want bool
	}{
		{[]string{`W/"x"`}, true},
		{[]string{`"y", W/"x"`}, true},
		{[]string{`"y"`, ` W/"x" `}, true},
		{[]string{`"x"`}, false},
		{[]string{`W/"x,y"`}, false},
		{[]string{`*`}, false},
		{[]string{`W/"x`}, false},
		{nil, false},
	} {
		if got := listsETag(c.inm, `W/"x"`); got != c.want {
			t.Errorf("listsETag(%q, W/\"x\") = %v, want %v", c.inm, got, c.want)
		}
	}
}

// TestNotModifiedETag: a 304 carries the ETag the 200 would have.
func TestNotModifiedETag(t *testing.T) {
	h := provision(t, &Handler{Rules: []Rule{{Find: "origin", Replace: "edge"}}})
	for _, c := range []struct {
		ctype, enc, etag, inm, want string
	}{
		{"text/html", "", `"x"`, `"x"`, `W/"x"`},       // names a substitutable type
		{"image/png", "", `"x"`, `W/"x"`, `"x"`},       // names another: untouched
		{"", "", `"x"`, `W/"x"`, `W/"x"`},              // no type: the client held the weak one
		{"", "", `"x"`, `"x"`, `"x"`},                  // it held the strong one
		{"", "", `"x"`, "", `"x"`},                     // it named none
		{"", "", `W/"x"`, `W/"x"`, `W/"x"`},            // the origin's own weak tag
		{"text/html", "gzip", `"x-gzip"`, "", `W/"x"`}, // coding suffix, as on the 200
		{"text/html", "compress", `"x"`, `"x"`, `"x"`}, // a 200 in this coding passes untouched
	} {
		r := request("GET", "/")
		if c.inm != "" {
			r.Header.Set("If-None-Match", c.inm)
		}
		hdr := map[string]string{"Etag": c.etag}
		if c.ctype != "" {
			hdr["Content-Type"] = c.ctype
		}
		if c.enc != "" {
			hdr["Content-Encoding"] = c.enc
		}
		rec := serve(t, h, r, origin(http.StatusNotModified, hdr, nil, 1))
		if rec.Code != http.StatusNotModified || rec.Header().Get("Etag") != c.want {
			t.Errorf("%+v: %d with ETag %s, want 304 with %s", c, rec.Code, rec.Header().Get("Etag"), c.want)
		}
	}
}

// TestMaxMatchZeroRefused: an explicit max_match 0 is an error, not the
// default (Caddyfile and JSON); an omitted one is the default.
func TestMaxMatchZeroRefused(t *testing.T) {
	d := caddyfile.NewTestDispenser("substitute {\n replace a b\n max_match 0\n}")
	if err := new(Handler).UnmarshalCaddyfile(d); err == nil || !strings.Contains(err.Error(), "max_match") {
		t.Errorf("Caddyfile max_match 0: error %v, want one about max_match", err)
	}
	load := func(js string) (*Handler, error) {
		h := new(Handler)
		if err := caddy.StrictUnmarshalJSON([]byte(js), h); err != nil {
			return nil, err
		}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		defer cancel()
		return h, provisionValidate(ctx, h)
	}
	if _, err := load(`{"rules":[{"find":"a","replace":"b"}],"max_match":0}`); err == nil || !strings.Contains(err.Error(), "substitute: max_match 0") {
		t.Errorf(`JSON "max_match": 0: error %v, want one about max_match 0`, err)
	}
	if h, err := load(`{"rules":[{"find":"a","replace":"b"}]}`); err != nil || h.MaxMatch != 16<<10 {
		t.Errorf("JSON without max_match: %v, want the default 16 KiB", err)
	}
	if _, err := load(`{"rules":[{"find":"a","replace":"b"}],"max_match":4096,"bogus":1}`); err == nil {
		t.Error("JSON with an unknown field accepted")
	}
}
