package integration

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// dictionaryBrowserAcceptEncoding is what Chromium sends over HTTPS.
const dictionaryBrowserAcceptEncoding = "gzip, deflate, br, zstd, dcb, dcz"

// dictionaryVersions writes two releases of a script into dir as
// app.1.js and app.2.js (the committed react-dom sample, and that sample
// with edits spread through it) and returns their bytes.
func dictionaryVersions(t *testing.T, dir string) (v1, v2 []byte) {
	t.Helper()
	v1, err := os.ReadFile(filepath.Join(brotliCorpus, "react-dom.production.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	v2 = bytes.Clone(v1)
	for i := 1; i < 10; i++ {
		at := i * len(v2) / 10
		v2 = append(v2[:at:at], append(fmt.Appendf(nil, "/*release 2, edit %d*/", i), v2[at:]...)...)
	}
	for name, b := range map[string][]byte{"app.1.js": v1, "app.2.js": v2} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return v1, v2
}

// dczDecode checks the dcz header of body and decodes it with the
// reference-compatible klauspost decoder given the raw dictionary.
func dczDecode(t *testing.T, dict, body []byte) []byte {
	t.Helper()
	magic := []byte{0x5e, 0x2a, 0x4d, 0x18, 0x20, 0x00, 0x00, 0x00}
	hash := sha256.Sum256(dict)
	if len(body) < 40 || !bytes.Equal(body[:8], magic) || !bytes.Equal(body[8:40], hash[:]) {
		t.Fatalf("dcz body does not start with the magic and the dictionary's hash: % x", body[:min(len(body), 40)])
	}
	dec, err := zstd.NewReader(bytes.NewReader(body[40:]), zstd.WithDecoderDictRaw(0, dict), zstd.WithDecoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	out, err := io.ReadAll(dec)
	if err != nil {
		t.Fatalf("decoding dcz: %v", err)
	}
	return out
}

func availableDictionary(b []byte) string {
	h := sha256.Sum256(b)
	return ":" + base64.StdEncoding.EncodeToString(h[:]) + ":"
}

// TestDictionaryEndToEnd: through a real Caddy (encode br gzip, then
// dictionary, then file_server), a first visit marks version 1; a second
// visit for version 2, naming version 1, gets dcz that decodes to version
// 2, over HTTP/1.1, HTTP/2 and HTTP/3. Another host served by the same
// handler never gets a delta against the first host's dictionary; a config
// reload keeps the dictionaries; once the dictionary is evicted, the
// response falls back to encode's br.
func TestDictionaryEndToEnd(t *testing.T) {
	root := t.TempDir()
	v1, v2 := dictionaryVersions(t, root)
	// Two more scripts large enough to evict version 1 from a store that
	// holds little more than one.
	for i, name := range []string{"app.3.js", "app.4.js"} {
		if err := os.WriteFile(filepath.Join(root, name), append(bytes.Repeat([]byte{'x'}, 10), append(fmt.Appendf(nil, "/*%d*/", i), v1...)...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	site := `
	encode br gzip
	dictionary /assets/* {
		match /assets/app.*.js
		match_dest script
		max_size 200KiB
		store_size 1800KiB
	}
	handle_path /assets/* {
		root * ` + root + `
		file_server
	}`
	sites := `
http://a.test:{$HTTP_PORT}, http://b.test:{$HTTP_PORT} {` + site + `
}
https://localhost:{$HTTPS_PORT} {
	tls internal` + site + `
}`
	c := StartCaddy(t, sites)
	c.WaitHTTPS(t)

	get := func(client *http.Client, url, host string, header ...string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		req.Header.Set("Accept-Encoding", dictionaryBrowserAcceptEncoding)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("Sec-Fetch-Mode", "no-cors")
		req.Header.Set("Sec-Fetch-Dest", "script")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, body := Do(t, client, req)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s (Host %s): status %d", url, host, resp.StatusCode)
		}
		return resp, []byte(body)
	}
	aHost := fmt.Sprintf("a.test:%d", c.HTTPPort)
	bHost := fmt.Sprintf("b.test:%d", c.HTTPPort)

	protocols := []struct {
		name   string
		client *http.Client
		url    func(string) string
		host   string
	}{
		{"h1", c.Client(), c.URL, aHost},
		{"h2", c.Client(), c.HTTPSURL, ""},
		{"h3", c.H3Client(), c.HTTPSURL, ""},
	}
	for _, p := range protocols {
		// First visit: version 1, compressed by encode (br), marked.
		resp, body := get(p.client, p.url("/assets/app.1.js"), p.host)
		if ce := resp.Header.Get("Content-Encoding"); ce != "br" {
			t.Fatalf("%s: first visit Content-Encoding %q, want br", p.name, ce)
		}
		if uad := resp.Header.Get("Use-As-Dictionary"); uad != `match="/assets/app.*.js", match-dest=("script")` {
			t.Fatalf("%s: Use-As-Dictionary %q", p.name, uad)
		}
		if got, _ := io.ReadAll(brotli.NewReader(bytes.NewReader(body))); !bytes.Equal(got, v1) {
			t.Fatalf("%s: first visit does not decode to version 1", p.name)
		}
		// Second visit: version 2 against version 1.
		resp, body = get(p.client, p.url("/assets/app.2.js"), p.host, "Available-Dictionary", availableDictionary(v1))
		if ce := resp.Header.Get("Content-Encoding"); ce != "dcz" {
			t.Fatalf("%s: second visit Content-Encoding %q, want dcz\n%s", p.name, ce, grepLines(c.Metrics(), "caddy_dictionary"))
		}
		if vary := strings.Join(resp.Header.Values("Vary"), ", "); !strings.Contains(strings.ToLower(vary), "available-dictionary") || !strings.Contains(strings.ToLower(vary), "accept-encoding") {
			t.Fatalf("%s: Vary %q", p.name, vary)
		}
		if got := dczDecode(t, v1, body); !bytes.Equal(got, v2) {
			t.Fatalf("%s: dcz does not decode to version 2", p.name)
		}
		t.Logf("%s: version 2 (%d bytes) sent as %d bytes of dcz", p.name, len(v2), len(body))
		if len(body) > len(v2)/10 {
			t.Errorf("%s: dcz is %d bytes for %d", p.name, len(body), len(v2))
		}
	}

	// Another host, same handler, same dictionary hash: no delta.
	resp, body := get(c.Client(), c.URL("/assets/app.2.js"), bHost, "Available-Dictionary", availableDictionary(v1))
	if ce := resp.Header.Get("Content-Encoding"); ce != "br" {
		t.Fatalf("other host: Content-Encoding %q, want br (no dictionary of its own)", ce)
	}
	if got, _ := io.ReadAll(brotli.NewReader(bytes.NewReader(body))); !bytes.Equal(got, v2) {
		t.Fatal("other host: body does not decode to version 2")
	}
	m := c.Metrics()
	if counterValue(t, m, `caddy_dictionary_misses_total{reason="unknown"}`) < 1 {
		t.Fatal("other host's miss not counted as unknown")
	}
	if counterValue(t, m, `caddy_dictionary_hits_total{encoding="dcz"}`) != 3 {
		t.Fatalf("hits: %s", grepLines(m, "caddy_dictionary_hits_total"))
	}

	// A config reload keeps the store (the handlers of the new config,
	// configured alike, take over the old ones' store): version 1, marked
	// before the reload, still gives a delta after it.
	get(c.Client(), c.URL("/assets/app.1.js"), aHost)
	if status, body := c.Load(sites); status != http.StatusOK {
		t.Fatalf("reload: %d %s", status, body)
	}
	resp, body = get(c.Client(), c.URL("/assets/app.2.js"), aHost, "Available-Dictionary", availableDictionary(v1))
	if ce := resp.Header.Get("Content-Encoding"); ce != "dcz" {
		t.Fatalf("after a reload: Content-Encoding %q, want dcz\n%s", ce, grepLines(c.Metrics(), "caddy_dictionary"))
	}
	if got := dczDecode(t, v1, body); !bytes.Equal(got, v2) {
		t.Fatal("after a reload: dcz does not decode to version 2")
	}

	// Eviction: the store (shared by both site blocks, configured alike)
	// holds two dictionaries of this size (each counts ~860 KiB with its
	// Brotli tables): version 1 and version 2, just marked. Two more push
	// version 1 out; naming it then gets br.
	get(c.Client(), c.URL("/assets/app.3.js"), aHost)
	get(c.Client(), c.URL("/assets/app.4.js"), aHost)
	resp, body = get(c.Client(), c.URL("/assets/app.2.js"), aHost, "Available-Dictionary", availableDictionary(v1))
	if ce := resp.Header.Get("Content-Encoding"); ce != "br" {
		t.Fatalf("after eviction: Content-Encoding %q, want br", ce)
	}
	if got, _ := io.ReadAll(brotli.NewReader(bytes.NewReader(body))); !bytes.Equal(got, v2) {
		t.Fatal("after eviction: body does not decode to version 2")
	}
	m = c.Metrics()
	if counterValue(t, m, "caddy_dictionary_evictions_total") < 1 {
		t.Fatalf("no eviction counted: %s", grepLines(m, "caddy_dictionary"))
	}
	if size := counterValue(t, m, "caddy_dictionary_store_bytes"); size <= 0 || size > 1800<<10 {
		t.Fatalf("store_bytes %v, want within (0, 1800KiB]", size)
	}
	if n := counterValue(t, m, "caddy_dictionary_store_dictionaries"); n != 2 {
		t.Fatalf("store_dictionaries %v, want 2", n)
	}
	if saved := counterValue(t, m, "caddy_dictionary_bytes_saved_total"); saved < float64(3*len(v2)*8/10) {
		t.Fatalf("bytes_saved_total %v for three deltas of %d bytes", saved, len(v2))
	}
}

// TestDictionaryWithSubstitute: with substitute in the same route (the
// default order puts dictionary outside it), the dictionary is the
// substituted body the browser got, and the delta decodes to the
// substituted version 2.
func TestDictionaryWithSubstitute(t *testing.T) {
	root := t.TempDir()
	v1, v2 := dictionaryVersions(t, root)
	c := StartCaddy(t, `
http://{$HOST}:{$HTTP_PORT} {
	encode br gzip
	substitute {
		replace "react-dom" "REACT-DOM"
		types text/javascript application/javascript
	}
	dictionary /assets/* /assets/app.*.js
	handle_path /assets/* {
		root * `+root+`
		file_server
	}
}`)
	sub1 := bytes.ReplaceAll(v1, []byte("react-dom"), []byte("REACT-DOM"))
	sub2 := bytes.ReplaceAll(v2, []byte("react-dom"), []byte("REACT-DOM"))
	if bytes.Equal(sub1, v1) {
		t.Fatal("the sample has no react-dom to substitute")
	}
	resp, body := Get(t, c.Client(), c.URL("/assets/app.1.js"), "Accept-Encoding", dictionaryBrowserAcceptEncoding)
	if resp.Header.Get("Use-As-Dictionary") == "" || resp.Header.Get("Content-Encoding") != "br" {
		t.Fatalf("first visit: Use-As-Dictionary %q, Content-Encoding %q", resp.Header.Get("Use-As-Dictionary"), resp.Header.Get("Content-Encoding"))
	}
	if got, _ := io.ReadAll(brotli.NewReader(strings.NewReader(body))); !bytes.Equal(got, sub1) {
		t.Fatal("first visit is not the substituted version 1")
	}
	// The browser names what it got: the substituted version 1.
	resp, body = Get(t, c.Client(), c.URL("/assets/app.2.js"), "Accept-Encoding", dictionaryBrowserAcceptEncoding,
		"Available-Dictionary", availableDictionary(sub1))
	if ce := resp.Header.Get("Content-Encoding"); ce != "dcz" {
		t.Fatalf("second visit: Content-Encoding %q, want dcz\n%s", ce, grepLines(c.Metrics(), "caddy_dictionary_misses"))
	}
	if got := dczDecode(t, sub1, []byte(body)); !bytes.Equal(got, sub2) {
		t.Fatal("the delta does not decode to the substituted version 2")
	}
}

// TestDictionaryCutUpstream: an upstream that cuts its responses mid-body
// makes reverse_proxy abort them (it panics with http.ErrAbortHandler).
// Through a real Caddy, such responses give back the encoder slot and the
// capture budget they held: afterwards, responses are still compressed
// against the dictionary (max_encoders 1) and still marked (a budget that
// two cut captures of max_size would have spent).
func TestDictionaryCutUpstream(t *testing.T) {
	v1 := bytes.Repeat([]byte("function release1(){return 'dictionary body';}\n"), 200)
	v2 := append(bytes.Clone(v1), "function release2(){}\n"...)
	origin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		switch r.URL.Path {
		case "/assets/app.1.js":
			_, _ = w.Write(v1)
		case "/assets/app.cut.js":
			_, _ = w.Write(v2[:len(v2)/2])
			http.NewResponseController(w).Flush()
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close() // mid-body: the chunked body never ends
			}
		default: // unknown length (chunked): the capture reserves max_size
			http.NewResponseController(w).Flush()
			_, _ = w.Write(v2)
		}
	}))
	c := StartCaddy(t, `
http://{$HOST}:{$HTTP_PORT} {
	dictionary /assets/* {
		match /assets/app.*.js
		encodings dcz
		max_size 64KiB
		store_size 160KiB
		max_encoders 1
	}
	reverse_proxy `+origin+`
}`)
	client := c.Client()
	get := func(path string, header ...string) (*http.Response, []byte, error) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, c.URL(path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept-Encoding", dictionaryBrowserAcceptEncoding)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, body, err
	}
	if resp, _, err := get("/assets/app.1.js"); err != nil || resp.Header.Get("Use-As-Dictionary") == "" {
		t.Fatalf("version 1 not marked: %v", err)
	}
	avail := availableDictionary(v1)
	for i := range 2 {
		resp, _, err := get("/assets/app.cut.js", "Available-Dictionary", avail)
		if err == nil {
			t.Fatalf("cut response %d read to its end", i)
		}
		if resp != nil && resp.Header.Get("Content-Encoding") != "dcz" {
			t.Fatalf("cut response %d: Content-Encoding %q, want dcz (the encoder must be in use when the stream is cut)", i, resp.Header.Get("Content-Encoding"))
		}
	}
	resp, body, err := get("/assets/app.2.js", "Available-Dictionary", avail)
	if err != nil {
		t.Fatal(err)
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "dcz" {
		t.Fatalf("after cut responses: Content-Encoding %q, want dcz\n%s", ce, grepLines(c.Metrics(), "caddy_dictionary_misses"))
	}
	if resp.Header.Get("Use-As-Dictionary") == "" {
		t.Fatal("after cut responses: version 2 not marked (capture budget not given back)")
	}
	if got := dczDecode(t, v1, body); !bytes.Equal(got, v2) {
		t.Fatal("dcz does not decode to version 2")
	}
}

// TestDictionaryCompressingOrigin: an origin that compresses for the
// client's Accept-Encoding sends bodies the handler cannot store (only
// identity bodies become dictionaries). With `header_up -Accept-Encoding`,
// as docs/dictionary.md advises, reverse_proxy asks for gzip itself and
// decodes it, and the body is marked and used as a dictionary.
func TestDictionaryCompressingOrigin(t *testing.T) {
	v1 := bytes.Repeat([]byte("function release1(){return 'dictionary body';}\n"), 200)
	v2 := append(bytes.Clone(v1), "function release2(){}\n"...)
	origin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := v1
		if r.URL.Path == "/assets/app.2.js" {
			body = v2
		}
		w.Header().Set("Content-Type", "text/javascript")
		w.Header().Set("Vary", "Accept-Encoding")
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			_, _ = w.Write(body)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		_, _ = gz.Write(body)
		_ = gz.Close()
	}))
	for _, tc := range []struct {
		name, proxy string
		marked      bool
	}{
		{"client's Accept-Encoding forwarded", "reverse_proxy " + origin, false},
		{"header_up -Accept-Encoding", "reverse_proxy " + origin + " {\n\t\theader_up -Accept-Encoding\n\t}", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := StartCaddy(t, `
http://{$HOST}:{$HTTP_PORT} {
	dictionary /assets/* /assets/app.*.js
	`+tc.proxy+`
}`)
			resp, body := Get(t, c.Client(), c.URL("/assets/app.1.js"), "Accept-Encoding", dictionaryBrowserAcceptEncoding)
			if marked := resp.Header.Get("Use-As-Dictionary") != ""; marked != tc.marked {
				t.Fatalf("marked %v (Content-Encoding %q), want %v", marked, resp.Header.Get("Content-Encoding"), tc.marked)
			}
			if !tc.marked {
				return
			}
			if resp.Header.Get("Content-Encoding") != "" || body != string(v1) {
				t.Fatalf("Content-Encoding %q, %d bytes: want version 1 as identity", resp.Header.Get("Content-Encoding"), len(body))
			}
			resp, body = Get(t, c.Client(), c.URL("/assets/app.2.js"), "Accept-Encoding", dictionaryBrowserAcceptEncoding,
				"Available-Dictionary", availableDictionary(v1))
			if ce := resp.Header.Get("Content-Encoding"); ce != "dcz" {
				t.Fatalf("Content-Encoding %q, want dcz", ce)
			}
			if got := dczDecode(t, v1, []byte(body)); !bytes.Equal(got, v2) {
				t.Fatal("dcz does not decode to version 2")
			}
		})
	}
}
