package integration

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
)

// brotliCorpus is the br module's committed sample of real bundles.
var brotliCorpus, _ = filepath.Abs("../brotli/testdata/corpus")

// brotliBrowserAcceptEncoding is what Chrome sends.
const brotliBrowserAcceptEncoding = "gzip, deflate, br, zstd"

// brotliSSEOrigin sends events, flushing each, and writes the next one only once
// the test has decoded the previous one from Caddy's Brotli stream (or gives
// up after 10 s, which fails the test).
func brotliSSEOrigin(delivered <-chan struct{}, events int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		for i := range events {
			fmt.Fprintf(w, "id: %d\ndata: {\"tick\":%d,\"padding\":%q}\n\n", i, i, strings.Repeat("ab", 40))
			http.NewResponseController(w).Flush()
			select {
			case <-delivered:
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Second):
				return
			}
		}
	}
}

func TestBrotliEncodeEndToEnd(t *testing.T) {
	delivered := make(chan struct{})
	const events = 4
	mux := http.NewServeMux()
	mux.Handle("/assets/", http.StripPrefix("/assets/", http.FileServer(http.Dir(brotliCorpus))))
	mux.Handle("/events", brotliSSEOrigin(delivered, events))
	origin := Origin(t, mux)

	site := `
	encode br gzip
	handle_path /static/* {
		root * ` + brotliCorpus + `
		file_server
	}
	reverse_proxy ` + origin
	c := StartCaddy(t, `
http://{$HOST}:{$HTTP_PORT} {`+site+`
}
https://localhost:{$HTTPS_PORT} {
	tls internal`+site+`
}`)
	c.WaitHTTPS(t)

	protocols := []struct {
		name   string
		client *http.Client
		url    func(string) string
		proto  string
	}{
		{"h1", c.Client(), c.URL, "HTTP/1.1"},
		{"h2", c.Client(), c.HTTPSURL, "HTTP/2.0"},
		{"h3", c.H3Client(), c.HTTPSURL, "HTTP/3.0"},
	}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			for _, path := range []string{
				"/assets/react-dom.production.min.js", // reverse_proxy
				"/static/react-dom.production.min.js", // file_server
				"/assets/caddy_home.html",
				"/static/jquery.min.js",
			} {
				want, err := os.ReadFile(filepath.Join(brotliCorpus, filepath.Base(path)))
				if err != nil {
					t.Fatal(err)
				}
				for _, tc := range []struct{ acceptEncoding, encoding string }{
					{brotliBrowserAcceptEncoding, "br"},
					{"gzip", "gzip"},
				} {
					resp, body := brotliFetch(t, p.client, p.url(path), tc.acceptEncoding)
					if resp.Proto != p.proto {
						t.Fatalf("%s: spoke %s, want %s", path, resp.Proto, p.proto)
					}
					if got := resp.Header.Get("Content-Encoding"); got != tc.encoding {
						t.Fatalf("%s with Accept-Encoding %q: Content-Encoding %q, want %q", path, tc.acceptEncoding, got, tc.encoding)
					}
					if !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
						t.Errorf("%s: Vary %q lacks Accept-Encoding", path, resp.Header.Get("Vary"))
					}
					decoded := brotliDecode(t, tc.encoding, body)
					if !bytes.Equal(decoded, want) {
						t.Fatalf("%s (%s): decoded %d bytes differ from the %d-byte original", path, tc.encoding, len(decoded), len(want))
					}
					if tc.encoding == "br" && len(body) >= len(want)/2 {
						t.Errorf("%s: Brotli wrote %d bytes for %d", path, len(body), len(want))
					}
				}
			}

			t.Run("server-sent events", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url("/events"), nil)
				req.Header.Set("Accept-Encoding", brotliBrowserAcceptEncoding)
				req.Header.Set("Accept", "text/event-stream")
				resp, err := p.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("GET /events: status %d", resp.StatusCode)
				}
				if got := resp.Header.Get("Content-Encoding"); got != "br" {
					t.Fatalf("event stream Content-Encoding %q, want br", got)
				}
				stream := bufio.NewReader(brotli.NewReader(resp.Body))
				for i := range events {
					// The origin holds event i+1 until this one is read here.
					id, err := stream.ReadString('\n')
					if err != nil || id != fmt.Sprintf("id: %d\n", i) {
						t.Fatalf("event %d: read %q, %v", i, id, err)
					}
					if data, err := stream.ReadString('\n'); err != nil || !strings.HasPrefix(data, fmt.Sprintf(`data: {"tick":%d,`, i)) {
						t.Fatalf("event %d: data line %q, %v", i, data, err)
					}
					if blank, err := stream.ReadString('\n'); err != nil || blank != "\n" {
						t.Fatalf("event %d: %q, %v", i, blank, err)
					}
					delivered <- struct{}{}
				}
				if rest, err := io.ReadAll(stream); err != nil || len(rest) > 0 {
					t.Fatalf("after the last event: %q, %v", rest, err)
				}
			})
		})
	}

	t.Run("refused reload keeps serving", func(t *testing.T) {
		status, body := c.Load(`http://{$HOST}:{$HTTP_PORT} {
	encode {
		br 12
	}
	reverse_proxy ` + origin + `
}`)
		if status == http.StatusOK || !strings.Contains(body, "br: quality 12: must be 0..11") {
			t.Fatalf("reload with br 12: status %d body %q; want a refusal naming the quality", status, body)
		}
		resp, _ := brotliFetch(t, c.Client(), c.URL("/assets/lodash.min.js"), brotliBrowserAcceptEncoding)
		if got := resp.Header.Get("Content-Encoding"); got != "br" {
			t.Fatalf("after the refused reload: Content-Encoding %q, want br", got)
		}
	})
}

func brotliFetch(t *testing.T, client *http.Client, url, acceptEncoding string) (*http.Response, []byte) {
	t.Helper()
	resp, body := Get(t, client, url, "Accept-Encoding", acceptEncoding)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", url, resp.StatusCode)
	}
	return resp, []byte(body)
}

func brotliDecode(t *testing.T, encoding string, body []byte) []byte {
	t.Helper()
	var r io.Reader
	switch encoding {
	case "br":
		r = brotli.NewReader(bytes.NewReader(body))
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	default:
		return body
	}
	decoded, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("decoding %s: %v", encoding, err)
	}
	return decoded
}
