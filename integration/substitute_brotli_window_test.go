package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/andybalholm/brotli"
)

// TestSubstituteBrotliWindowIsBounded: found in reading for issue 26. A br
// upstream may declare a 16 MiB window (lgwin 24), and substitute's br
// decoder then grows to hold 16 MiB for that response, twice the 8 MiB
// zstd is held to. A stream declaring more than 8 MiB is refused as zstd
// refuses one: the response aborts (the client sees a broken body, never a
// complete one) and counts as a decode error; one of 8 MiB (lgwin 23)
// decodes and is substituted in full.
func TestSubstituteBrotliWindowIsBounded(t *testing.T) {
	// 1 MiB: the window is in the stream's first byte, and the encoder
	// writes the one asked for whatever the size (checked below by the
	// refusal); TestBrotliWindowIsBounded in substitute/ decodes 12 MiB.
	var page bytes.Buffer
	for i := 0; page.Len() < 1<<20; i++ {
		fmt.Fprintf(&page, "<a href=\"https://origin.example/p/%d\">item %x</a>\n", i, i*2654435761)
	}
	encoded := map[string][]byte{}
	for _, lgwin := range []int{23, 24} {
		var buf bytes.Buffer
		w := brotli.NewWriterOptions(&buf, brotli.WriterOptions{Quality: 4, LGWin: lgwin})
		_, _ = w.Write(page.Bytes())
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		encoded["/lgwin"+strconv.Itoa(lgwin)] = buf.Bytes()
	}
	var refusable atomic.Int64 // requests for the lgwin 24 stream
	origin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/lgwin24" {
			refusable.Add(1)
		}
		body, ok := encoded[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "br")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	c := StartCaddy(t, fmt.Sprintf(`
http://{$HOST}:{$HTTP_PORT} {
	substitute {
		replace origin.example edge.example
	}
	reverse_proxy %s
}`, origin))
	client := c.Client()

	resp, body := getSubstStatus(t, client, c.URL("/lgwin23"), map[string]string{"Accept-Encoding": brotliBrowserAcceptEncoding}, 200)
	if want := strings.ReplaceAll(page.String(), "origin.example", "edge.example"); body != want {
		t.Errorf("lgwin 23: %d bytes (Content-Encoding %q), want the substituted %d", len(body), resp.Header.Get("Content-Encoding"), len(want))
	}

	req, err := http.NewRequest(http.MethodGet, c.URL("/lgwin24"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", brotliBrowserAcceptEncoding)
	// Refused at the stream's first byte: the connection closes before
	// the header is out (no response), or, had it been flushed, without the
	// last chunk. Never a complete response.
	if resp, err = client.Do(req); err == nil {
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Errorf("lgwin 24: %d, the body (%d bytes) ended cleanly; want the response refused (aborted)", resp.StatusCode, len(got))
		}
	}
	t.Logf("lgwin 24: %v", err)
	// net/http's client sends an idempotent request again when the
	// connection closes before any response byte: each counts.
	if n, want := counterValue(t, c.Metrics(), "caddy_substitute_decode_errors_total"), float64(refusable.Load()); n != want || n == 0 {
		t.Errorf("decode_errors_total %v, want %v (one per refused response)", n, want)
	}
	if logs := c.Logs(); !strings.Contains(logs, "exceeds substitute's bound of 8 MiB") {
		t.Errorf("no warning naming the bound in the log:\n%s", grepLines(logs, "substitute"))
	}
}
