package caddybrotli

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/andybalholm/brotli"
	brrr "github.com/molecule-man/go-brrr"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
)

// decoders are the two independent Brotli decoders every encoder's output
// must satisfy.
var decoders = []struct {
	name string
	new  func(io.Reader) io.Reader
}{
	{"andybalholm", func(r io.Reader) io.Reader { return brotli.NewReader(r) }},
	{"brrr", func(r io.Reader) io.Reader { return brrr.NewReader(r) }},
}

// checkDecodes checks that compressed decodes to want with both decoders,
// and that its first prefixLen bytes (a flushed, unfinished stream) already
// decode to want[:prefixWant].
func checkDecodes(t *testing.T, compressed []byte, prefixLen, prefixWant int, want []byte) {
	t.Helper()
	for _, d := range decoders {
		got, err := io.ReadAll(d.new(bytes.NewReader(compressed)))
		if err != nil {
			t.Fatalf("%s decoder: %v", d.name, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s decoder: got %d bytes, want %d", d.name, len(got), len(want))
		}
		prefix := make([]byte, prefixWant)
		if _, err := io.ReadFull(d.new(bytes.NewReader(compressed[:prefixLen])), prefix); err != nil {
			t.Fatalf("%s decoder: flushed prefix (%d bytes) does not decode to the %d bytes written before Flush: %v",
				d.name, prefixLen, prefixWant, err)
		}
		if !bytes.Equal(prefix, want[:prefixWant]) {
			t.Fatalf("%s decoder: flushed prefix decodes to different bytes", d.name)
		}
	}
}

// encodeFlushed drives enc as the encode handler does, with a Flush after
// each split point; it returns the stream and its length at the last Flush.
func encodeFlushed(t *testing.T, enc encode.Encoder, data []byte, splits ...int) (stream []byte, flushedLen, flushedData int) {
	t.Helper()
	var out bytes.Buffer
	enc.Reset(&out)
	written := 0
	for _, split := range splits {
		if _, err := enc.Write(data[written:split]); err != nil {
			t.Fatal(err)
		}
		if err := enc.Flush(); err != nil {
			t.Fatal(err)
		}
		written = split
	}
	flushedLen, flushedData = out.Len(), written
	if err := writeChunked(enc, data[written:]); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	enc.Reset(nil)
	return out.Bytes(), flushedLen, flushedData
}

// Every encoder's output over the corpus, at every quality and several
// windows, with a Flush in the middle, decodes with both decoders; the
// flushed half decodes on its own. One pooled encoder per setting serves
// all files, as in the encode handler. Under -race, the small file only.
func TestEncodersCrossDecode(t *testing.T) {
	files := loadCorpus(t, "*")
	small := loadCorpus(t, "react.production.min.js") // qualities 10, 11: seconds per MB
	for _, e := range brotliEncoders {
		for _, window := range []int{10, 16, 20, 22, 24} {
			for quality := minQuality; quality <= maxQuality; quality++ {
				files := files
				if quality >= 10 || testing.Short() || raceEnabled {
					files = small
				}
				enc := e.new(quality, window)
				for _, file := range files {
					t.Run(fmt.Sprintf("%s/w%d/q%d/%s", e.name, window, quality, file.name), func(t *testing.T) {
						half := len(file.data) / 2
						stream, flushedLen, flushedData := encodeFlushed(t, enc, file.data, half/2, half)
						checkDecodes(t, stream, flushedLen, flushedData, file.data)
					})
				}
			}
		}
	}
}

// Both encoders in pools hammered from several goroutines (run under -race):
// each response decodes to its own body.
func TestEncodersPooledConcurrently(t *testing.T) {
	files := loadCorpus(t, "*.js")
	for _, e := range brotliEncoders {
		for _, quality := range []int{1, 5, 11} {
			t.Run(fmt.Sprintf("%s/q%d", e.name, quality), func(t *testing.T) {
				pool := sync.Pool{New: func() any { return e.new(quality, 16) }}
				var wg sync.WaitGroup
				for g := range 4 {
					wg.Go(func() {
						for i := range 6 {
							data := files[(g+i)%len(files)].data
							if quality >= 10 {
								data = data[:8<<10]
							}
							enc := pool.Get().(encode.Encoder)
							var out bytes.Buffer
							enc.Reset(&out)
							if err := writeChunked(enc, data); err != nil {
								t.Error(err)
								return
							}
							if err := enc.Close(); err != nil {
								t.Error(err)
								return
							}
							enc.Reset(nil)
							pool.Put(enc)
							for _, d := range decoders {
								got, err := io.ReadAll(d.new(bytes.NewReader(out.Bytes())))
								if err != nil || !bytes.Equal(got, data) {
									t.Errorf("%s decoder: %d bytes, %v; want %d bytes", d.name, len(got), err, len(data))
									return
								}
							}
						}
					})
				}
				wg.Wait()
			})
		}
	}
}

// FuzzEncodersCrossDecode feeds arbitrary bodies to either encoder at any
// quality and window, with Flushes at two arbitrary points, through pooled
// encoders: both decoders must return the body, and the stream as of the
// last Flush must decode to everything written before it.
func FuzzEncodersCrossDecode(f *testing.F) {
	f.Add([]byte("data: hello\n\n"), uint8(1), uint8(5), uint8(10), uint16(3), uint16(6))
	f.Add([]byte(""), uint8(0), uint8(0), uint8(0), uint16(0), uint16(0))
	f.Add(bytes.Repeat([]byte("function(a){return a}"), 200), uint8(1), uint8(11), uint8(6), uint16(100), uint16(4000))
	f.Add([]byte{0, 0xff, 0xfe, 0x80, 0x81}, uint8(0), uint8(3), uint8(14), uint16(1), uint16(3))
	f.Add(bytes.Repeat([]byte{'a'}, 8000), uint8(1), uint8(9), uint8(12), uint16(7999), uint16(65535))

	var mu sync.Mutex
	pools := map[[3]int]*sync.Pool{}
	poolFor := func(encoder, quality, window int) *sync.Pool {
		mu.Lock()
		defer mu.Unlock()
		key := [3]int{encoder, quality, window}
		if pools[key] == nil && len(pools) >= 16 {
			// 2 encoders x 12 qualities x 15 windows of pooled encoders
			// would hold gigabytes (andybalholm keeps ~70 MB at quality 11).
			clear(pools)
		}
		if pools[key] == nil {
			pools[key] = &sync.Pool{New: func() any { return brotliEncoders[encoder].new(quality, window) }}
		}
		return pools[key]
	}

	f.Fuzz(func(t *testing.T, body []byte, encoder, quality, window uint8, split1, split2 uint16) {
		if len(body) > 8<<10 {
			return // qualities 10 and 11 make long inputs too slow to explore
		}
		e := int(encoder) % len(brotliEncoders)
		q := int(quality) % (maxQuality + 1)
		w := minWindow + int(window)%(maxWindow-minWindow+1)
		if q >= 10 && len(body) > 1<<10 {
			body = body[:1<<10] // else minimizing an input at 10 or 11 takes minutes
		}
		s1, s2 := min(int(split1), len(body)), min(int(split2), len(body))
		if s1 > s2 {
			s1, s2 = s2, s1
		}
		pool := poolFor(e, q, w)
		enc := pool.Get().(encode.Encoder)
		defer pool.Put(enc)
		stream, flushedLen, flushedData := encodeFlushed(t, enc, body, s1, s2)
		checkDecodes(t, stream, flushedLen, flushedData, body)
	})
}
