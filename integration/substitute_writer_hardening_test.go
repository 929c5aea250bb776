package integration

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// flushingOrigin answers /c/<coding> with body in that coding, without
// Content-Length, coding and flushing every 100-500 bytes of it, as an
// origin running `encode zstd gzip` in front of a streaming source does:
// reverse_proxy then flushes after each read, and substitute gets many small
// flushes, each with what little the decoder could decode. The first chunks
// are paced so that reverse_proxy reads them one by one.
func flushingOrigin(t *testing.T, body []byte) string {
	return Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		enc := strings.TrimPrefix(r.URL.Path, "/c/")
		var zw interface {
			io.Writer
			Flush() error
			Close() error
		}
		switch enc {
		case "identity":
		case "gzip":
			zw = gzip.NewWriter(w)
		case "deflate":
			zw = zlib.NewWriter(w)
		case "br":
			zw = brotli.NewWriter(w)
		case "zstd":
			z, err := zstd.NewWriter(w)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			zw = z
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/javascript")
		if zw != nil {
			w.Header().Set("Content-Encoding", enc)
		}
		w.WriteHeader(http.StatusOK)
		for i, b := 0, body; len(b) > 0; i++ {
			n := min(len(b), 100+(i*137)%401)
			if zw != nil {
				_, _ = zw.Write(b[:n])
				_ = zw.Flush()
			} else {
				_, _ = w.Write(b[:n])
			}
			w.(http.Flusher).Flush()
			b = b[n:]
			if i < 20 {
				time.Sleep(2 * time.Millisecond)
			}
		}
		if zw != nil {
			_ = zw.Close()
		}
	}))
}

// decodeBody decodes a response body in the given Content-Encoding.
func decodeBody(t *testing.T, enc, body string) string {
	t.Helper()
	var r io.Reader
	switch enc {
	case "gzip":
		zr, err := gzip.NewReader(strings.NewReader(body))
		if err != nil {
			t.Fatalf("gzip: %v", err)
		}
		r = zr
	case "br":
		r = brotli.NewReader(strings.NewReader(body))
	case "zstd":
		zr, err := zstd.NewReader(strings.NewReader(body))
		if err != nil {
			t.Fatalf("zstd: %v", err)
		}
		defer zr.Close()
		r = zr
	default:
		t.Fatalf("unexpected Content-Encoding %q", enc)
	}
	plain, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s body does not decode: %v", enc, err)
	}
	return string(plain)
}

// TestSubstituteSmallFlushesStillCompressed: whatever the upstream's coding
// and chunking, encode compresses what substitute writes, as it would an
// unsubstituted body of that size (issue 14: jquery.min.js went out as
// 87,533 identity bytes behind a zstd origin).
func TestSubstituteSmallFlushesStillCompressed(t *testing.T) {
	var js bytes.Buffer
	for i := range 1500 {
		fmt.Fprintf(&js, "function f%d(a){return fetch(\"https://origin.example/api/%d\",a)}\n", i, i)
	}
	want := strings.ReplaceAll(js.String(), "origin.example", "edge.example")
	origin := flushingOrigin(t, js.Bytes())
	c := StartCaddy(t, fmt.Sprintf(`
http://{$HOST}:{$HTTP_PORT} {
	encode zstd br gzip
	substitute {
		replace origin.example edge.example
	}
	reverse_proxy %s
}
`, origin))
	client := c.Client()
	for _, enc := range []string{"identity", "gzip", "br", "zstd", "deflate"} {
		resp, body := Get(t, client, c.URL("/c/"+enc), "Accept-Encoding", "gzip, deflate, br, zstd")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("origin %s: status %d", enc, resp.StatusCode)
		}
		ce := resp.Header.Get("Content-Encoding")
		if ce == "" {
			t.Errorf("origin %s, flushed in small chunks: sent uncompressed (%d bytes of a %d-byte body)", enc, len(body), len(want))
			continue
		}
		if got := decodeBody(t, ce, body); got != want {
			t.Errorf("origin %s: %s body decodes to %d bytes, want the %d-byte substituted body", enc, ce, len(got), len(want))
		}
		if len(body) > len(want)/3 {
			t.Errorf("origin %s: %d compressed bytes for %d", enc, len(body), len(want))
		}
	}
}
