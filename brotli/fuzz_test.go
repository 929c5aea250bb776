package caddybrotli

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
)

// FuzzRoundTrip feeds arbitrary response bodies, split at an arbitrary
// point with a Flush there, through pooled encoders at every quality: the
// flushed prefix and then the whole stream must decode to what was written,
// however the previous user left the encoder.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("data: hello\n\n"), uint8(5), uint16(6))
	f.Add([]byte(""), uint8(0), uint16(0))
	f.Add(bytes.Repeat([]byte("function(a){return a}"), 200), uint8(11), uint16(4000))
	f.Add([]byte{0, 0xff, 0xfe, 0x80, 0x81}, uint8(1), uint16(3))
	f.Add(bytes.Repeat([]byte{'a'}, 8000), uint8(9), uint16(65535))

	pools := make([]sync.Pool, maxQuality+1)
	for quality := range pools {
		b := mustProvision(f, fmt.Sprintf(`{"quality":%d,"window":16}`, quality))
		pools[quality].New = func() any { return b.NewEncoder() }
	}

	f.Fuzz(func(t *testing.T, body []byte, quality uint8, split uint16) {
		if len(body) > 8<<10 {
			return // qualities 10 and 11 make long inputs too slow to explore
		}
		pool := &pools[int(quality)%len(pools)]
		enc := pool.Get().(encode.Encoder)
		defer func() { enc.Reset(nil); pool.Put(enc) }()
		roundTrip(t, enc, body, min(int(split), len(body)))
	})
}
