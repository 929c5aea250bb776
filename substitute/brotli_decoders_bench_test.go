package substitute

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/andybalholm/brotli"
	brrr "github.com/molecule-man/go-brrr"
)

// brotliDecoder is one Brotli library's streaming reader, used the way
// decode.go uses it: one pooled reader, Reset per upstream body.
type brotliDecoder struct {
	name  string
	new   func(io.Reader) io.Reader
	reset func(r, src io.Reader) error
}

var brotliDecoders = []brotliDecoder{
	{"andybalholm",
		func(src io.Reader) io.Reader { return brotli.NewReader(src) },
		func(r, src io.Reader) error { return r.(*brotli.Reader).Reset(src) }},
	{"go-brrr",
		func(src io.Reader) io.Reader { return brrr.NewReader(src) },
		func(r, src io.Reader) error { r.(*brrr.Reader).Reset(src); return nil }},
}

// BenchmarkBrotliDecoders decodes br upstream bodies with both libraries'
// readers side by side, through a reused reader and copyPooled as
// decode.go does: the HTML page and the React development bundle, each
// compressed at quality 5 (encode br's default) and 11 (what origins
// precompress with). MB/s is of decoded bytes, per core.
//
//	go test -run '^$' -bench BenchmarkBrotliDecoders -count 6 ./substitute/
func BenchmarkBrotliDecoders(b *testing.B) {
	html := benchPage(b)
	js, err := os.ReadFile("internal/engine/testdata/react-dom.development.js")
	if err != nil {
		b.Skip("no benchmark page:", err)
	}
	for _, body := range []struct {
		name string
		data []byte
	}{{"html", html}, {"js", js}} {
		for _, quality := range []int{5, 11} {
			var compressed bytes.Buffer
			w := brotli.NewWriterLevel(&compressed, quality)
			if _, err := w.Write(body.data); err != nil {
				b.Fatal(err)
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			for _, dec := range brotliDecoders {
				b.Run(fmt.Sprintf("%s/q%d/%s", body.name, quality, dec.name), func(b *testing.B) {
					src := bytes.NewReader(compressed.Bytes())
					r := dec.new(src)
					var out bytes.Buffer
					out.Grow(len(body.data))
					b.SetBytes(int64(len(body.data)))
					b.ReportAllocs()
					for b.Loop() {
						src.Reset(compressed.Bytes())
						if err := dec.reset(r, src); err != nil {
							b.Fatal(err)
						}
						out.Reset()
						if _, err := copyPooled(&out, r); err != nil {
							b.Fatal(err)
						}
					}
					if !bytes.Equal(out.Bytes(), body.data) {
						b.Fatalf("%s decoded %d bytes, not the body", dec.name, out.Len())
					}
				})
			}
		}
	}
}
