package substitute

import (
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
)

// benchRules are the 10 rules (6 literal, 4 regex) of
// integration/bench-substitute.sh.
var benchRules = []Rule{
	{Find: "https://doc.rust-lang.org", Replace: "https://docs.example.org"},
	{Find: "<table>", Replace: `<table class="t">`},
	{Find: "https://llvm.org", Replace: "https://llvm.example.org"},
	{Find: "rustc", Replace: "RUSTC"},
	{Find: "legacyWidget", Replace: "widget"},
	{Find: "https://cdn.example.com/", Replace: "/static/"},
	{Find: `https?://github\.com/([\w-]+)`, Regex: true, Replace: "https://git.example.com/$1"},
	{Find: `\bwarning\b`, Regex: true, Replace: "WARN"},
	{Find: `\bv(\d+)\.(\d+)\.(\d+)\b`, Regex: true, Replace: "v$1.$2.x"},
	{Find: `campaign-[0-9a-f]{8}`, Regex: true, Replace: "campaign"},
}

// discardWriter is a client that costs nothing.
type discardWriter struct{ hdr http.Header }

func (d *discardWriter) Header() http.Header         { return d.hdr }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// BenchmarkHandler runs the ~1 MB HTML page through the handler in the
// 32 KiB chunks reverse_proxy writes, with the memo off and on (some rules
// match the page, so the memo remembers nothing: every body is scanned, and
// memo=on adds the cost of a memo miss).
func BenchmarkHandler(b *testing.B) {
	page := benchPage(b)
	for _, memo := range []struct {
		name string
		memo int
	}{{"memo=off", MemoOff}, {"memo=on", 0}} {
		b.Run(memo.name, func(b *testing.B) {
			h := provision(b, &Handler{Rules: benchRules, Memo: memo.memo})
			benchServe(b, h, len(page), page, map[string]string{"Content-Type": "text/html; charset=utf-8", "Etag": `"v1"`})
		})
	}
}

// BenchmarkHandlerDecoding runs the same page through the handler sent
// compressed by the upstream, in 32 KiB writes: the cost of decoding on
// top of BenchmarkHandler, and the allocations per compressed response.
//
//	go test -run '^$' -bench BenchmarkHandlerDecoding -benchmem ./substitute/
func BenchmarkHandlerDecoding(b *testing.B) {
	page := benchPage(b)
	for _, enc := range []string{"gzip", "deflate", "br", "zstd"} {
		b.Run(enc, func(b *testing.B) {
			h := provision(b, &Handler{Rules: benchRules, Memo: MemoOff})
			benchServe(b, h, len(page), compress(b, enc, page), map[string]string{"Content-Type": "text/html; charset=utf-8", "Content-Encoding": enc})
		})
	}
}

func benchPage(b *testing.B) []byte {
	page, err := os.ReadFile("internal/engine/testdata/rustc-book.html")
	if err != nil {
		b.Skip("no benchmark page:", err)
	}
	return page
}

// benchServe answers body with the header hdr through h, in the 32 KiB
// writes reverse_proxy makes, once per iteration; size is the decoded
// size, for MB/s.
func benchServe(b *testing.B, h *Handler, size int, body []byte, hdr map[string]string) {
	next := asCaddy(origin(200, hdr, body, 32<<10))
	r := request("GET", "/page.html")
	w := &discardWriter{hdr: http.Header{}}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		clear(w.hdr)
		if err := h.ServeHTTP(w, r, next); err != nil {
			b.Fatal(err)
		}
	}
}

// manyRules are the 200 rules of testdata/rules200.txt (150 literals, 50
// regexes), none of which occurs on the benchmark pages
// (BenchmarkHandlerManyRules checks): the first 10 have the shapes of
// benchRules, the other 190 are rules an edge operator might carry for a
// whole site (old CDN hostnames, tracking scripts, legacy class names,
// renamed brands and contacts, product codes, regional shop URLs and
// tracking parameters). integration/bench-memo.sh reads the same file.
func manyRules(b *testing.B) []Rule {
	data, err := os.ReadFile("testdata/rules200.txt")
	if err != nil {
		b.Fatal(err)
	}
	var rules []Rule
	for n, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 || f[0] != "replace" && f[0] != "regex" {
			b.Fatalf("testdata/rules200.txt:%d: want kind<TAB>find<TAB>replacement, got %q", n+1, line)
		}
		rules = append(rules, Rule{Find: f[1], Regex: f[0] == "regex", Replace: f[2]})
	}
	return rules
}

// BenchmarkHandlerManyRules is BenchmarkHandler with 200 rules (150
// literals, 50 regexes), with the memo off and on, side by side:
//
//   - html-some: the HTML page with benchRules and the last 190 of
//     manyRules (some of benchRules match, none of the others): the memo
//     remembers nothing, so memo=on is a full scan plus a memo miss;
//   - html-none: the HTML page with manyRules, none of which occurs on
//     it: the memo streams the body unscanned;
//   - js-none: the same for the ~1 MB React bundle, as
//     application/javascript.
//
// Each case reports how many rules matched the page (matched-rules).
//
//	go test -run '^$' -bench BenchmarkHandlerManyRules -count 6 ./substitute/
func BenchmarkHandlerManyRules(b *testing.B) {
	html := benchPage(b)
	js, err := os.ReadFile("internal/engine/testdata/react-dom.development.js")
	if err != nil {
		b.Skip("no benchmark page:", err)
	}
	none := manyRules(b)
	some := append(slices.Clone(benchRules), none[len(benchRules):]...)
	for _, c := range []struct {
		name  string
		rules []Rule
		page  []byte
		ctype string
		want  int // rules expected to match; -1: some
	}{
		{"html-some", some, html, "text/html; charset=utf-8", -1},
		{"html-none", none, html, "text/html; charset=utf-8", 0},
		{"js-none", none, js, "application/javascript", 0},
	} {
		if len(c.rules) != 200 {
			b.Fatalf("%s: %d rules, want 200", c.name, len(c.rules))
		}
		matched := matchedRules(b, c.rules, c.page)
		if c.want >= 0 && matched != c.want || c.want < 0 && matched == 0 {
			b.Fatalf("%s: %d of %d rules match the page", c.name, matched, len(c.rules))
		}
		b.Run(c.name, func(b *testing.B) {
			for _, memo := range []struct {
				name string
				memo int
			}{{"memo=off", MemoOff}, {"memo=on", 0}} {
				b.Run(memo.name, func(b *testing.B) {
					h := provision(b, &Handler{Rules: c.rules, Memo: memo.memo})
					benchServe(b, h, len(c.page), c.page, map[string]string{"Content-Type": c.ctype, "Etag": `"v1"`})
					b.ReportMetric(float64(matched), "matched-rules")
				})
			}
		})
	}
}

// matchedRules is how many of rules replace something in page.
func matchedRules(b *testing.B, rules []Rule, page []byte) int {
	h := provision(b, &Handler{Rules: rules, Memo: MemoOff})
	st := h.set.NewStream(io.Discard, nil)
	if _, err := st.Write(page); err != nil {
		b.Fatal(err)
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	n := 0
	for i := range rules {
		if st.Matched().Has(i) {
			n++
		}
	}
	return n
}

// BenchmarkMemoKey is the cost of the memo's key for one response: without
// Vary, with Vary: Accept-Encoding (canonical and lower case), and for a
// request with a browser's cookies.
//
//	go test -run '^$' -bench BenchmarkMemoKey -benchmem ./substitute/
func BenchmarkMemoKey(b *testing.B) {
	m := newMemo(DefaultMemo)
	for _, c := range []struct {
		name   string
		vary   string
		cookie string
	}{
		{"plain", "", ""},
		{"vary", "Accept-Encoding, Accept-Language", ""},
		{"vary-lower", "accept-encoding", ""},
		{"cookie", "Accept-Encoding", "_ga=GA1.1.1234567890.1700000000; session=" + strings.Repeat("x", 200)},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := request("GET", "/docs/page.html?lang=en")
			r.Header.Set("Accept-Encoding", "gzip, deflate, br, zstd")
			r.Header.Set("Accept-Language", "en-GB,en;q=0.9")
			if c.cookie != "" {
				r.Header.Set("Cookie", c.cookie)
			}
			hdr := http.Header{"Content-Type": {"text/html"}, "Etag": {`"v1"`}}
			if c.vary != "" {
				hdr["Vary"] = []string{c.vary}
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := m.representation(r, http.StatusOK, hdr); !ok {
					b.Fatal("not memoisable")
				}
			}
		})
	}
}

// BenchmarkHandlerEvicted is BenchmarkHandler (memo off) with the caches
// cold at every write, as inside Caddy under load: before each 32 KiB
// write the origin writes a 4 MiB buffer (outside the timer), then copies
// the chunk into its own 32 KiB buffer, as reverse_proxy's read of the
// upstream socket does, so that only the chunk is hot.
func BenchmarkHandlerEvicted(b *testing.B) {
	page := benchPage(b)
	h := provision(b, &Handler{Rules: benchRules, Memo: MemoOff})
	scratch := make([]byte, 4<<20)
	chunk := make([]byte, 32<<10)
	next := asCaddy(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		for p := page; len(p) > 0; {
			b.StopTimer()
			for i := 0; i < len(scratch); i += 64 {
				scratch[i]++
			}
			n := copy(chunk, p)
			b.StartTimer()
			_, _ = w.Write(chunk[:n])
			p = p[n:]
		}
	})
	r := request("GET", "/page.html")
	w := &discardWriter{hdr: http.Header{}}
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		clear(w.hdr)
		if err := h.ServeHTTP(w, r, next); err != nil {
			b.Fatal(err)
		}
	}
}
