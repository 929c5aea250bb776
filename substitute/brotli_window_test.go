package substitute

import (
	"bytes"
	"net/http"
	"runtime"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// brotliWindowBody is large enough that a decoder's window grows to the
// stream's declared size: go-brrr grows its ring buffer with the output,
// up to the window.
const brotliWindowBody = 12 << 20

// encodeBrotliWindow compresses b with andybalholm/brotli (an encoder
// independent of the decoder under test) with the window 2^lgwin, and
// checks that the stream declares it.
func encodeBrotliWindow(t *testing.T, b []byte, lgwin int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := brotli.NewWriterOptions(&buf, brotli.WriterOptions{Quality: 4, LGWin: lgwin})
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// RFC 7932 §9.1: WBITS 16 is a 0 bit; 18..24 are a 1 bit, then
	// WBITS-17 in 3 bits.
	first := buf.Bytes()[0]
	if lgwin == 16 && first&1 != 0 || lgwin >= 18 && first&0xf != byte(lgwin-17)<<1|1 {
		t.Fatalf("encoder's stream starts %08b, not a window of 2^%d", first, lgwin)
	}
	return buf.Bytes()
}

// TestBrotliWindowIsBounded: a br stream may declare a window of up to
// 16 MiB (lgwin 24), and the decoder then holds up to that much per
// response, twice zstd's 8 MiB bound. A stream whose window exceeds 8 MiB
// is refused as zstd refuses one: the response aborts and counts as a
// decode error. Up to 8 MiB (lgwin 23) it decodes, and decoding a 12 MiB
// body allocates about the window, not more.
func TestBrotliWindowIsBounded(t *testing.T) {
	h := basicHandler(t)
	plain := varied(brotliWindowBody)
	hdr := map[string]string{"Content-Type": "text/plain", "Content-Encoding": "br"}

	big := encodeBrotliWindow(t, plain, 24)
	before := testutil.ToFloat64(metrics.decodeFailures)
	if o := serveChunks(t, h, hdr, chunked(big, 32<<10)); !o.aborted {
		t.Errorf("br stream with a 16 MiB window: ServeHTTP ended normally with %d bytes (write failed: %v), want it refused (aborted)", len(o.body), o.writeFailed)
	}
	if got := testutil.ToFloat64(metrics.decodeFailures); got != before+1 {
		t.Errorf("decode_errors_total went from %v to %v, want +1", before, got)
	}

	for _, lgwin := range []int{16, 22, 23} {
		body := encodeBrotliWindow(t, plain, lgwin)
		w := &discardWriter{hdr: http.Header{}}
		next := asCaddy(origin(200, hdr, body, 32<<10))
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		if err := h.ServeHTTP(w, request("GET", "/"), next); err != nil {
			t.Fatalf("lgwin %d: %v", lgwin, err)
		}
		runtime.ReadMemStats(&m1)
		allocated := m1.TotalAlloc - m0.TotalAlloc
		t.Logf("lgwin %d: %.1f MiB allocated decoding %d MiB", lgwin, float64(allocated)/(1<<20), brotliWindowBody>>20)
		// Under -race sync.Pool drops what is put back, so buffers are
		// allocated afresh: the bound is checked without it (CI runs the
		// tests once more without -race).
		if limit := uint64(1)<<lgwin + 6<<20; allocated > limit && !raceEnabled {
			t.Errorf("lgwin %d: decoding allocated %.1f MiB, want at most %.1f (the window and buffers)", lgwin, float64(allocated)/(1<<20), float64(limit)/(1<<20))
		}
	}
	// Decoded in full and substituted, at the largest window allowed.
	rec := serve(t, h, request("GET", "/"), origin(200, hdr, encodeBrotliWindow(t, plain, 23), 32<<10))
	want := serve(t, h, request("GET", "/"), origin(200, map[string]string{"Content-Type": "text/plain"}, plain, 32<<10))
	if !bytes.Equal(rec.Body.Bytes(), want.Body.Bytes()) {
		t.Errorf("lgwin 23: decoded body differs from the identity one (%d bytes, want %d)", rec.Body.Len(), want.Body.Len())
	}
}
