package substitute

import (
	"net/http"
	"os"
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
// 32 KiB chunks reverse_proxy writes, with the memo off (every body
// scanned) and on (same strong ETag: scanned for the matching rules only).
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
	page, err := os.ReadFile("engine/testdata/rustc-book.html")
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
