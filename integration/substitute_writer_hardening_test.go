package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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
		zw, err := substituteEncoder(enc, w)
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		case zw == nil && enc != "identity":
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

// TestSubstitute304CarriesTheWeakETag: a 304 through substitute carries the
// validator the 200 would have (RFC 9110 §15.4.5): the weak ETag, without
// the coding suffix of the origin's encode, which is no longer the coding
// of the body the client got.
func TestSubstitute304CarriesTheWeakETag(t *testing.T) {
	dir := t.TempDir()
	var js bytes.Buffer
	for i := range 200 {
		fmt.Fprintf(&js, "load(\"https://origin.example/m/%d.js\");\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "app.js"), js.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// The origin as Caddy users run it: encode zstd gzip + file_server.
	originCaddy := StartCaddy(t, fmt.Sprintf(`
http://{$HOST}:{$HTTP_PORT} {
	encode zstd gzip
	root * %s
	file_server
}
`, dir))
	// A Go origin (net/http drops Content-Type from every 304; the unit
	// test TestNotModifiedETag covers 304s that name their type).
	goOrigin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Etag", `"x"`)
		if strings.Contains(r.Header.Get("If-None-Match"), `"x"`) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "origin.example page")
	}))
	c := StartCaddy(t, fmt.Sprintf(`
http://{$HOST}:{$HTTP_PORT} {
	encode zstd br gzip
	substitute {
		replace origin.example edge.example
	}
	handle /app.js {
		reverse_proxy %s {
			header_up Host {upstream_hostport}
		}
	}
	handle {
		reverse_proxy %s
	}
}
`, strings.TrimPrefix(originCaddy.URL(""), "http://"), goOrigin))
	client := c.Client()
	const browser = "gzip, deflate, br, zstd"

	resp, _ := Get(t, client, c.URL("/app.js"), "Accept-Encoding", browser)
	etag := resp.Header.Get("Etag")
	if resp.StatusCode != http.StatusOK || etag == "" {
		t.Fatalf("200: status %d, ETag %q", resp.StatusCode, etag)
	}
	if !strings.HasPrefix(etag, `W/"`) || strings.Contains(etag, "-zstd") || strings.Contains(etag, "-gzip") {
		t.Errorf("200: status %d, ETag %q, want a weak ETag without the origin's coding suffix", resp.StatusCode, etag)
	}
	for _, ae := range []string{browser, "identity", "gzip"} {
		resp, body := Get(t, client, c.URL("/app.js"), "Accept-Encoding", ae, "If-None-Match", etag)
		if resp.StatusCode != http.StatusNotModified || body != "" {
			t.Fatalf("conditional GET (Accept-Encoding %q) with %s: status %d, want 304", ae, etag, resp.StatusCode)
		}
		if got := resp.Header.Get("Etag"); got != etag {
			t.Errorf("304 (Accept-Encoding %q) carries ETag %q, the 200 carried %q", ae, got, etag)
		}
	}

	// The Go origin: 200 W/"x"; a 304 to W/"x" carries W/"x".
	resp, body := Get(t, client, c.URL("/page"), "Accept-Encoding", browser)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Etag") != `W/"x"` {
		t.Fatalf("200: status %d, ETag %q (%q), want W/\"x\"", resp.StatusCode, resp.Header.Get("Etag"), body)
	}
	for _, tc := range []struct{ path, inm, want string }{
		{"/page", `W/"x"`, `W/"x"`},
		{"/page", `"y", W/"x"`, `W/"x"`},
		// The client holds the strong form (from an unsubstituted 200): it
		// keeps it, as nothing says what the 200 would be.
		{"/page", `"x"`, `"x"`},
	} {
		resp, _ := Get(t, client, c.URL(tc.path), "Accept-Encoding", browser, "If-None-Match", tc.inm)
		if resp.StatusCode != http.StatusNotModified {
			t.Errorf("%s with If-None-Match %s: status %d, want 304", tc.path, tc.inm, resp.StatusCode)
			continue
		}
		if got := resp.Header.Get("Etag"); got != tc.want {
			t.Errorf("%s with If-None-Match %s: 304 carries ETag %q, want %q", tc.path, tc.inm, got, tc.want)
		}
	}
}
