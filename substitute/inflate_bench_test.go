package substitute

import (
	"bufio"
	"bytes"
	stdgzip "compress/gzip"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// BenchmarkInflate is the floor under a gzip origin: inflating the 1 MB
// page (gzip level 6, as the gzip origin of integration/bench-profile.sh
// serves it) into io.Discard, with nothing else, through klauspost's
// reader from a bufio.Reader as the decoder feeds it, and through the
// standard library's for comparison. MB/s are of the inflated page.
//
//	go test -run '^$' -bench BenchmarkInflate -count 6 ./substitute/
func BenchmarkInflate(b *testing.B) {
	page := benchPage(b)
	var gz bytes.Buffer
	zw, _ := stdgzip.NewWriterLevel(&gz, 6)
	zw.Write(page)
	zw.Close()
	src := bufio.NewReaderSize(nil, 16<<10)
	buf := make([]byte, 32<<10)
	inflate := func(zr interface {
		io.Reader
		Reset(io.Reader) error
	}) func(*testing.B) {
		return func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				src.Reset(bytes.NewReader(gz.Bytes()))
				if err := zr.Reset(src); err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, zr, buf); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("klauspost", inflate(new(gzip.Reader)))
	b.Run("stdlib", inflate(new(stdgzip.Reader)))
}
