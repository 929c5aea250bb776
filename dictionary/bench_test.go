package dictionary

import (
	"bytes"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	brrr "github.com/molecule-man/go-brrr"
	"go.uber.org/zap"
)

// BenchmarkCompressRelease compresses the next release of a script, side by
// side in one run: with br q5 and a 1 MiB window (what `encode br` does by
// default, on a pooled writer) and against the previous release as dcz and
// as dcb (the handler's pooled encoders, delta cache aside). ns/op is the
// CPU one response costs; wire-bytes what it sends.
func BenchmarkCompressRelease(b *testing.B) {
	old, cur := sampleVersions(b)
	b.Run("br-q5", func(b *testing.B) {
		w, err := brrr.NewWriterOptions(nil, 5, brrr.WriterOptions{LGWin: 20})
		if err != nil {
			b.Fatal(err)
		}
		var out countingDiscard
		b.SetBytes(int64(len(cur)))
		for b.Loop() {
			out.n = 0
			w.Reset(&out)
			if _, err := w.Write(cur); err != nil {
				b.Fatal(err)
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(out.n), "wire-bytes")
	})
	for _, coding := range []string{codingDCZ, codingDCB} {
		b.Run(coding, func(b *testing.B) {
			p := newPools(old, testEncoderConfig)
			var out countingDiscard
			b.SetBytes(int64(len(cur)))
			for b.Loop() {
				out.n = 0
				enc, err := p.acquire(coding)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.start(coding, enc, &out); err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(enc, bytes.NewReader(cur)); err != nil {
					b.Fatal(err)
				}
				if err := enc.Close(); err != nil {
					b.Fatal(err)
				}
				p.put(coding, enc)
			}
			b.ReportMetric(float64(out.n), "wire-bytes")
		})
	}
}

type countingDiscard struct{ n int }

func (c *countingDiscard) Write(p []byte) (int, error) {
	c.n += len(p)
	return len(p), nil
}

// BenchmarkDeltaResponse serves the next release of a script as dcz through
// the handler, delta cache off (so each response is compressed), below the
// write idle writer Caddy's server puts under every handler: the cost of a
// delta response with its bookkeeping (slot, write bounds, marking).
func BenchmarkDeltaResponse(b *testing.B) {
	old, cur := sampleVersions(b)
	h := provision(b, &Handler{Match: "/assets/app.*.js", Encodings: []string{codingDCZ}, DeltaCacheSize: DeltaCacheOff})
	serve(b, h, browserRequest("a.test", "/assets/app.1.js"), file(old))
	avail := formatAvailableDictionary(sha256.Sum256(old))
	next := file(cur)
	b.SetBytes(int64(len(cur)))
	for b.Loop() {
		rec := httptest.NewRecorder()
		iw := &caddyhttp.IdleTimeoutWriter{
			ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: rec},
			Ctrl:                  http.NewResponseController(rec),
			Deadline:              caddyhttp.IdleDeadline{Start: time.Now(), Timeout: time.Minute},
			Logger:                zap.NewNop(),
		}
		r := browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail)
		r = r.WithContext(caddyhttp.ContextWithIdleTimeouts(r.Context(), nil, iw))
		if err := h.ServeHTTP(iw, r, next); err != nil {
			b.Fatal(err)
		}
		if rec.Header().Get("Content-Encoding") != codingDCZ {
			b.Fatal("not a delta")
		}
	}
}
