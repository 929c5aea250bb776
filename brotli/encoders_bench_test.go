package caddybrotli

import (
	"fmt"
	"sync"
	"testing"

	"github.com/andybalholm/brotli"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
)

// brotliEncoders are the two pure-Go Brotli encoders compared for issue 19:
// andybalholm/brotli built the way NewEncoder built it before, and go-brrr
// from NewEncoder itself.
var brotliEncoders = []struct {
	name string
	new  func(quality, window int) encode.Encoder
}{
	{"andybalholm", func(quality, window int) encode.Encoder {
		return brotli.NewWriterOptions(nil, brotli.WriterOptions{Quality: quality, LGWin: window})
	}},
	{"brrr", func(quality, window int) encode.Encoder {
		return (&Brotli{Quality: &quality, Window: window}).NewEncoder()
	}},
}

// BenchmarkEncoders compresses the whole corpus (scripts and HTML, each file
// its own response) with andybalholm/brotli and go-brrr side by side, at
// every quality and windows 20 and 22, through the path Caddy's encode
// handler takes: an encoder from a sync.Pool, Reset to the response, 32 KiB
// Writes, Close, Reset(nil), Put. The pool is warm before timing starts, so
// allocs/op and B/op are what a warm pool costs; "allocs/resp" divides by
// the number of responses. "bytes" is the compressed total. MB/s is per
// goroutine (go-brrr uses a second worker goroutine at qualities 10 and 11
// when GOMAXPROCS >= 2).
//
//	go test -run '^$' -bench BenchmarkEncoders -benchtime 3x ./brotli/
func BenchmarkEncoders(b *testing.B) {
	files := loadCorpus(b, "*")
	total := 0
	for _, file := range files {
		total += len(file.data)
	}
	for _, window := range []int{20, 22} {
		for quality := minQuality; quality <= maxQuality; quality++ {
			for _, e := range brotliEncoders {
				b.Run(fmt.Sprintf("w%d/q%d/%s", window, quality, e.name), func(b *testing.B) {
					pool := sync.Pool{New: func() any { return e.new(quality, window) }}
					var out countingWriter
					respond := func() int {
						out.n = 0
						for _, file := range files {
							enc := pool.Get().(encode.Encoder)
							enc.Reset(&out)
							if err := writeChunked(enc, file.data); err != nil {
								b.Fatal(err)
							}
							if err := enc.Close(); err != nil {
								b.Fatal(err)
							}
							enc.Reset(nil)
							pool.Put(enc)
						}
						return out.n
					}
					compressed := respond() // warms the pool
					b.SetBytes(int64(total))
					b.ReportAllocs()
					for b.Loop() {
						respond()
					}
					b.ReportMetric(float64(compressed), "bytes")
					b.ReportMetric(float64(testing.AllocsPerRun(1, func() { respond() }))/float64(len(files)), "allocs/resp")
				})
			}
		}
	}
}
