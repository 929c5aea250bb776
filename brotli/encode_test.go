package caddybrotli

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/andybalholm/brotli"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/encode/gzip"
)

// newEncode provisions Caddy's encode handler as `encode br gzip` adapts
// to, with the given br config.
func newEncode(tb testing.TB, brConfig string) *encode.Encode {
	tb.Helper()
	enc := &encode.Encode{
		EncodingsRaw: caddy.ModuleMap{"br": []byte(brConfig), "gzip": []byte(`{}`)},
		Prefer:       []string{"br", "gzip"},
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	tb.Cleanup(cancel)
	if err := enc.Provision(ctx); err != nil {
		tb.Fatalf("provisioning encode: %v", err)
	}
	if err := enc.Validate(); err != nil {
		tb.Fatalf("validating encode: %v", err)
	}
	return enc
}

func serveBody(contentType string, body []byte) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", contentType)
		_, err := w.Write(body)
		return err
	})
}

func get(tb testing.TB, enc *encode.Encode, acceptEncoding string, next caddyhttp.Handler) *httptest.ResponseRecorder {
	tb.Helper()
	r := httptest.NewRequest(http.MethodGet, "/app.js", nil)
	if acceptEncoding != "" {
		r.Header.Set("Accept-Encoding", acceptEncoding)
	}
	w := httptest.NewRecorder()
	if err := enc.ServeHTTP(w, r, next); err != nil {
		tb.Fatalf("ServeHTTP: %v", err)
	}
	return w
}

// `encode br` writes `"br":{}`: the bytes on the wire must be quality 5's,
// not the zero value's (quality 0).
func TestBareEncodeBrCompressesAtQuality5(t *testing.T) {
	script := loadCorpus(t, "react-dom.production.min.js")[0].data
	w := get(t, newEncode(t, `{}`), "br", serveBody("text/javascript", script))

	q5 := compressWith(t, 5, 20, script)
	q0 := compressWith(t, 0, 20, script)
	if got := w.Body.Bytes(); !bytes.Equal(got, q5) {
		t.Fatalf("bare br config wrote %d bytes; quality 5 writes %d, quality 0 writes %d", len(got), len(q5), len(q0))
	}
}

func TestEncodeNegotiation(t *testing.T) {
	script := loadCorpus(t, "jquery.min.js")[0].data
	enc := newEncode(t, `{"quality":6}`)
	for _, tc := range []struct {
		acceptEncoding, want string
	}{
		{"gzip, deflate, br, zstd", "br"}, // Chrome
		{"gzip, deflate, br", "br"},       // Firefox, Safari
		{"br;q=0.5, gzip", "gzip"},        // client preference wins
		{"gzip", "gzip"},
		{"", ""},
	} {
		w := get(t, enc, tc.acceptEncoding, serveBody("application/javascript", script))
		if got := w.Header().Get("Content-Encoding"); got != tc.want {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, want %q", tc.acceptEncoding, got, tc.want)
			continue
		}
		if got := w.Header().Get("Vary"); got != "Accept-Encoding" {
			t.Errorf("Accept-Encoding %q: Vary %q", tc.acceptEncoding, got)
		}
		body := w.Body.Bytes()
		switch tc.want {
		case "br":
			body = decompress(t, body)
		case "gzip":
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(body, script) {
			t.Errorf("Accept-Encoding %q: body differs from the original", tc.acceptEncoding)
		}
	}
}

// Pooled encoders shared by concurrent responses of different files must
// never mix their streams (run with -race).
func TestPooledEncodersUnderConcurrency(t *testing.T) {
	var files []corpusFile
	for _, file := range loadCorpus(t, "*") {
		if len(file.data) < 100<<10 { // the race detector slows Brotli tenfold
			files = append(files, file)
		}
	}
	enc := newEncode(t, `{}`)
	var wg sync.WaitGroup
	for worker := range 4 {
		wg.Go(func() {
			for i := range 4 {
				file := files[(worker+i)%len(files)]
				// Errorf, not Fatalf: this is not the test's goroutine.
				r := httptest.NewRequest(http.MethodGet, "/"+file.name, nil)
				r.Header.Set("Accept-Encoding", "br")
				w := httptest.NewRecorder()
				if err := enc.ServeHTTP(w, r, serveBody("text/html", file.data)); err != nil {
					t.Errorf("%s: %v", file.name, err)
					return
				}
				if w.Header().Get("Content-Encoding") != "br" {
					t.Errorf("%s: not Brotli encoded", file.name)
					return
				}
				got, err := io.ReadAll(brotli.NewReader(w.Body))
				if err != nil || !bytes.Equal(got, file.data) {
					t.Errorf("%s: decoded body differs (%d bytes, %v)", file.name, len(got), err)
				}
			}
		})
	}
	wg.Wait()
}

// Server-sent events through `encode br`: each event must reach the client
// and decode before the origin writes the next one.
func TestServerSentEventsStreamThroughBrotli(t *testing.T) {
	enc := newEncode(t, `{}`)
	const events = 5
	delivered := make(chan int)
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i := range events {
			if _, err := fmt.Fprintf(w, "data: event %d\n\n", i); err != nil {
				return err
			}
			if err := http.NewResponseController(w).Flush(); err != nil {
				return err
			}
			// Wait until the client decoded this event: with a buffering
			// encoder it never does and the request times out.
			select {
			case <-delivered:
			case <-r.Context().Done():
				return r.Context().Err()
			}
		}
		return nil
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = enc.ServeHTTP(w, r, next)
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	req.Header.Set("Accept-Encoding", "br")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := resp.Header.Get("Content-Encoding"); got != "br" {
		t.Fatalf("Content-Encoding %q, want br", got)
	}
	lines := bufio.NewReader(brotli.NewReader(resp.Body))
	for i := range events {
		want := fmt.Sprintf("data: event %d\n", i)
		line, err := lines.ReadString('\n')
		if err != nil || line != want {
			t.Fatalf("event %d: read %q, %v; want %q", i, line, err, want)
		}
		if blank, err := lines.ReadString('\n'); err != nil || blank != "\n" {
			t.Fatalf("event %d: missing blank line: %q, %v", i, blank, err)
		}
		delivered <- i
	}
	if rest, err := io.ReadAll(lines); err != nil || len(rest) != 0 {
		t.Fatalf("after the last event: %q, %v", rest, err)
	}
}

// A warm pool hands the same encoders back: a response costs a few
// allocations, not a new encoder's multi-megabyte buffers. (Under -race,
// sync.Pool drops a quarter of Puts on purpose, so the bound is three quarters of a
// fresh encoder's cost, not a fixed small number.)
func TestWarmPoolReusesEncoders(t *testing.T) {
	script := loadCorpus(t, "lodash.min.js")[0].data // one write above 64 KiB: full buffers
	allocated := func(n int, f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			f()
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / uint64(n)
	}

	b := mustProvision(t, `{}`)
	fresh := allocated(3, func() { compressFiles(t, b.NewEncoder(), []corpusFile{{data: script}}) })

	enc := newEncode(t, `{}`)
	next := serveBody("text/javascript", script)
	r := httptest.NewRequest(http.MethodGet, "/app.js", nil)
	r.Header.Set("Accept-Encoding", "br")
	w := &discardResponseWriter{header: make(http.Header)}
	serve := func() {
		clear(w.header)
		if err := enc.ServeHTTP(w, r, next); err != nil {
			t.Fatal(err)
		}
	}
	serve() // fills the pool
	pooled := allocated(60, serve)
	if pooled > fresh*3/4 {
		t.Fatalf("%d bytes allocated per response, a fresh encoder costs %d: encoders are not reused from the pool", pooled, fresh)
	}
	t.Logf("%d bytes allocated per response; a fresh encoder costs %d", pooled, fresh)
}
