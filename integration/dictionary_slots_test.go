package integration

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDictionaryStalledReadersLoseSlots: through a real Caddy, an HTTP/2
// client that opens max_encoders delta streams and never reads them holds
// every encoder slot (another client's delta goes to encode, busy) only
// until encoder_write_idle (default 10s) passes: its streams are cut, and
// another client then gets a delta again, within a bound well under the
// server's own write_idle timeout (1 minute by default), and with that
// timeout off, when nothing else would ever free the slots.
func TestDictionaryStalledReadersLoseSlots(t *testing.T) {
	root := t.TempDir()
	// Random bytes: the delta of version 2 is as large as version 2, far
	// more than the client's flow-control window.
	rng := rand.New(rand.NewChaCha8([32]byte{26}))
	v1, v2 := make([]byte, 64<<10), make([]byte, 2<<20)
	for _, b := range [][]byte{v1, v2} {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	for name, b := range map[string][]byte{"app.1.js": v1, "app.2.js": v2} {
		if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const maxEncoders = 2
	sites := `
https://localhost:{$HTTPS_PORT} {
	tls internal
	dictionary /assets/* {
		match /assets/app.*.js
		encodings dcz
		max_encoders 2
	}
	handle_path /assets/* {
		root * ` + root + `
		file_server
	}
}`
	for _, tc := range []struct{ name, global string }{
		{"server write_idle default", ""},
		{"server write_idle off", "servers {\n\t\ttimeouts {\n\t\t\twrite_idle -1s\n\t\t}\n\t}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := StartCaddyWith(t, Options{Global: tc.global}, sites)
			c.WaitHTTPS(t)
			request := func(path string, header ...string) *http.Request {
				req, err := http.NewRequest(http.MethodGet, c.HTTPSURL(path), nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Accept-Encoding", dictionaryBrowserAcceptEncoding)
				for i := 0; i+1 < len(header); i += 2 {
					req.Header.Set(header[i], header[i+1])
				}
				return req
			}
			avail := availableDictionary(v1)
			if resp, _ := Do(t, c.Client(), request("/assets/app.1.js")); resp.Header.Get("Use-As-Dictionary") == "" {
				t.Fatal("version 1 not marked")
			}

			// The stalled client: 64 KiB flow-control windows, which it
			// never opens further since it reads no body, and no timeout
			// of its own (which would reset its streams).
			stalled := c.client(&net.Dialer{Timeout: 10 * time.Second})
			stalled.Timeout = 0
			stalled.Transport.(*http.Transport).HTTP2 = &http.HTTP2Config{
				MaxReceiveBufferPerConnection: 64 << 10, MaxReceiveBufferPerStream: 64 << 10,
			}
			defer stalled.CloseIdleConnections()
			var held []*http.Response
			for range maxEncoders {
				resp, err := stalled.Do(request("/assets/app.2.js", "Available-Dictionary", avail))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.Proto != "HTTP/2.0" || resp.Header.Get("Content-Encoding") != "dcz" {
					t.Fatalf("stalled stream: %s, Content-Encoding %q; want an HTTP/2 dcz stream", resp.Proto, resp.Header.Get("Content-Encoding"))
				}
				held = append(held, resp)
			}
			// The slots are held: another client's delta goes to encode.
			resp, _ := Do(t, c.Client(), request("/assets/app.2.js", "Available-Dictionary", avail))
			if ce := resp.Header.Get("Content-Encoding"); ce == "dcz" {
				t.Fatal("a delta was sent while the stalled streams should hold every encoder slot: the test does not stall them")
			}

			// Wait for the event: another client gets a delta again.
			start := time.Now()
			var body []byte
			ok := WaitFor(t.Context(), 40*time.Second, func() bool {
				resp, b := Do(t, c.Client(), request("/assets/app.2.js", "Available-Dictionary", avail))
				body = []byte(b)
				return resp.Header.Get("Content-Encoding") == "dcz"
			})
			if !ok {
				t.Fatalf("no delta within 40s of %d stalled streams taking every encoder slot\n%s", maxEncoders, grepLines(c.Metrics(), "caddy_dictionary_misses"))
			}
			t.Logf("a delta again %v after the slots were taken", time.Since(start).Round(100*time.Millisecond))
			if got := dczDecode(t, v1, body); !bytes.Equal(got, v2) {
				t.Fatal("the delta does not decode to version 2")
			}
			// The stalled streams were cut, not completed.
			for i, resp := range held {
				if _, err := io.Copy(io.Discard, resp.Body); err == nil {
					t.Errorf("stalled stream %d ended cleanly; want it cut", i)
				}
			}
		})
	}
}
