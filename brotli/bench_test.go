package caddybrotli

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	brrr "github.com/molecule-man/go-brrr"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
	caddygzip "github.com/caddyserver/caddy/v2/modules/caddyhttp/encode/gzip"
	caddyzstd "github.com/caddyserver/caddy/v2/modules/caddyhttp/encode/zstd"
)

// chunk is the size of the writes file_server and reverse_proxy make
// (io.Copy's buffer), so encoders see the writes they see in production.
const chunk = 32 << 10

// countingWriter discards what it is given and counts it.
type countingWriter struct{ n int }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	return len(p), nil
}

// writeChunked writes data in writes of at most chunk bytes.
func writeChunked(w io.Writer, data []byte) error {
	for len(data) > 0 {
		n := min(chunk, len(data))
		if _, err := w.Write(data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// compressFiles compresses each file as its own response with one reused
// encoder, as a warm pool does, and returns the compressed total.
func compressFiles(tb testing.TB, enc encode.Encoder, files []corpusFile) int {
	var out countingWriter
	for _, file := range files {
		enc.Reset(&out)
		if err := writeChunked(enc, file.data); err != nil {
			tb.Fatal(err)
		}
		if err := enc.Close(); err != nil {
			tb.Fatal(err)
		}
	}
	return out.n
}

func provisionEncoding(tb testing.TB, enc encode.Encoding) encode.Encoding {
	tb.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: tb.Context()})
	tb.Cleanup(cancel)
	if err := enc.(caddy.Provisioner).Provision(ctx); err != nil {
		tb.Fatal(err)
	}
	return enc
}

// BenchmarkCorpus compresses real minified scripts and a real HTML page
// with br at every quality, Caddy's gzip (level 5) and Caddy's zstd
// (default level, 128 KiB window), one goroutine each: MB/s is per core,
// "bytes" the compressed total, "x-gzip" that total over gzip's.
//
//	go test -run '^$' -bench BenchmarkCorpus ./brotli/
func BenchmarkCorpus(b *testing.B) {
	gzip := provisionEncoding(b, &caddygzip.Gzip{})
	type encoderCase struct {
		name     string
		encoding encode.Encoding
	}
	cases := []encoderCase{
		{"gzip-5", gzip},
		{"zstd-default", provisionEncoding(b, &caddyzstd.Zstd{})},
	}
	for quality := minQuality; quality <= maxQuality; quality++ {
		cases = append(cases, encoderCase{fmt.Sprintf("br-q%d", quality), mustProvision(b, fmt.Sprintf(`{"quality":%d}`, quality))})
	}

	for _, group := range []struct{ name, pattern string }{
		{"js", "*.js"},
		{"html", "*.html"},
	} {
		files := loadCorpus(b, group.pattern)
		total := 0
		for _, file := range files {
			total += len(file.data)
		}
		gzipBytes := compressFiles(b, gzip.NewEncoder(), files)
		for _, c := range cases {
			b.Run(group.name+"/"+c.name, func(b *testing.B) {
				enc := c.encoding.NewEncoder()
				b.SetBytes(int64(total))
				var compressed int
				for b.Loop() {
					compressed = compressFiles(b, enc, files)
				}
				b.ReportMetric(float64(compressed), "bytes")
				b.ReportMetric(float64(compressed)/float64(gzipBytes), "x-gzip")
			})
		}
	}
}

// discardResponseWriter is a reusable http.ResponseWriter that counts the
// body: the cost of a real connection is not what is measured here.
type discardResponseWriter struct {
	header http.Header
	countingWriter
}

func (w *discardResponseWriter) Header() http.Header { return w.header }
func (w *discardResponseWriter) WriteHeader(int)     {}

// BenchmarkCaddyVsLibrary measures what Caddy's encode pipeline (handler,
// response writer, encoder pool) costs on top of the library: each
// iteration compresses the script corpus at the default quality once with
// the library's writer alone and once through encode.ServeHTTP with
// `encode br`, in alternation so that other load on the machine hits both
// alike. Reported: MB/s of each and caddy/library (1 = no loss).
//
//	go test -run '^$' -bench BenchmarkCaddyVsLibrary ./brotli/
func BenchmarkCaddyVsLibrary(b *testing.B) {
	files := loadCorpus(b, "*.js")
	total := 0
	for _, file := range files {
		total += len(file.data)
	}

	library, err := brrr.NewWriterOptions(nil, DefaultQuality, brrr.WriterOptions{LGWin: DefaultWindow})
	if err != nil {
		b.Fatal(err)
	}

	enc := newEncode(b, `{}`)
	var current []byte
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		return writeChunked(w, current)
	})
	r := httptest.NewRequest(http.MethodGet, "/app.js", nil)
	r.Header.Set("Accept-Encoding", "gzip, deflate, br, zstd")
	w := &discardResponseWriter{header: make(http.Header)}
	throughCaddy := func(file corpusFile) int {
		w.n = 0
		clear(w.header)
		current = file.data
		if err := enc.ServeHTTP(w, r, next); err != nil {
			b.Fatal(err)
		}
		if w.header.Get("Content-Encoding") != "br" {
			b.Fatalf("%s: not Brotli encoded", file.name)
		}
		return w.n
	}
	throughLibrary := func(file corpusFile) int {
		return compressFiles(b, library, []corpusFile{file})
	}

	// Same settings, same bytes: otherwise the comparison is meaningless.
	for _, file := range files {
		if libBytes, caddyBytes := throughLibrary(file), throughCaddy(file); libBytes != caddyBytes {
			b.Fatalf("%s: library wrote %d bytes, Caddy %d", file.name, libBytes, caddyBytes)
		}
	}

	// Alternate per file, and which goes first, so that load from elsewhere
	// on the machine falls on both alike.
	var libTime, caddyTime time.Duration
	timed := func(total *time.Duration, compress func(corpusFile) int, file corpusFile) {
		start := time.Now()
		compress(file)
		*total += time.Since(start)
	}
	round := 0
	for b.Loop() {
		for _, file := range files {
			if round%2 == 0 {
				timed(&libTime, throughLibrary, file)
				timed(&caddyTime, throughCaddy, file)
			} else {
				timed(&caddyTime, throughCaddy, file)
				timed(&libTime, throughLibrary, file)
			}
			round++
		}
	}
	mb := float64(total) * float64(b.N) / 1e6
	b.ReportMetric(mb/libTime.Seconds(), "library-MB/s")
	b.ReportMetric(mb/caddyTime.Seconds(), "caddy-MB/s")
	b.ReportMetric(libTime.Seconds()/caddyTime.Seconds(), "caddy/library")
	b.ReportMetric(0, "ns/op") // two passes per op: the rates above are the result
}
