package integration

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDictionaryHeadMirrorsGet: through a real Caddy (encode br gzip, then
// dictionary, then file_server), over HTTP/1.1 and HTTP/2, a HEAD gets the
// header fields its GET gets (RFC 9110 §9.3.2): on a marked path
// Use-As-Dictionary and Vary: Accept-Encoding, Available-Dictionary; naming
// a stored dictionary, also Content-Encoding: dcz and the coded ETag. A
// delta's Content-Length is only known once compressed: the HEAD omits it
// until the delta cache holds the GET's bytes, then sends their length. A
// HEAD is not counted as a hit.
func TestDictionaryHeadMirrorsGet(t *testing.T) {
	root := t.TempDir()
	v1, _ := dictionaryVersions(t, root)
	site := `
	encode br gzip
	dictionary /assets/* {
		match /assets/app.*.js
	}
	handle_path /assets/* {
		root * ` + root + `
		file_server
	}`
	c := StartCaddy(t, `
http://{$HOST}:{$HTTP_PORT} {`+site+`
}
https://localhost:{$HTTPS_PORT} {
	tls internal`+site+`
}`)
	c.WaitHTTPS(t)
	client := c.Client()

	for _, p := range []struct {
		name, spoken string
		url          func(string) string
	}{{"h1", "HTTP/1.1", c.URL}, {"h2", "HTTP/2.0", c.HTTPSURL}} {
		send := func(method, path string, header ...string) (*http.Response, string) {
			t.Helper()
			req, err := http.NewRequest(method, p.url(path), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept-Encoding", dictionaryBrowserAcceptEncoding)
			for i := 0; i+1 < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			resp, body := Do(t, client, req)
			if resp.StatusCode != http.StatusOK || resp.Proto != p.spoken {
				t.Fatalf("%s: %s %s: status %d over %s", p.name, method, path, resp.StatusCode, resp.Proto)
			}
			if method == http.MethodHead && body != "" {
				t.Fatalf("%s: HEAD %s sent a body of %d bytes", p.name, path, len(body))
			}
			return resp, body
		}
		// same reports the fields that differ between a GET's and a HEAD's
		// header. Vary is compared as a set of lowercased tokens.
		same := func(what string, get, head *http.Response, fields ...string) {
			t.Helper()
			for _, f := range fields {
				g, h := get.Header.Values(f), head.Header.Values(f)
				if f == "Vary" {
					g, h = varyTokens(g), varyTokens(h)
				}
				if !slices.Equal(g, h) {
					t.Errorf("%s: %s: GET has %s %q, HEAD %q", p.name, what, f, g, h)
				}
			}
		}
		mirrored := []string{"Content-Encoding", "Vary", "Use-As-Dictionary", "Etag", "Content-Type", "Accept-Ranges"}

		// A marked path, no dictionary named: encode's br, marked.
		get, _ := send(http.MethodGet, "/assets/app.1.js")
		head, _ := send(http.MethodHead, "/assets/app.1.js")
		if get.Header.Get("Use-As-Dictionary") == "" || get.Header.Get("Content-Encoding") != "br" {
			t.Fatalf("%s: first visit: Use-As-Dictionary %q, Content-Encoding %q", p.name, get.Header.Get("Use-As-Dictionary"), get.Header.Get("Content-Encoding"))
		}
		same("marked", get, head, mirrored...)

		// Naming version 1, before any GET of version 2: nothing cached,
		// so no Content-Length.
		avail := availableDictionary(v1)
		hits := counterValue(t, c.Metrics(), `caddy_dictionary_hits_total{encoding="dcz"}`)
		head, _ = send(http.MethodHead, "/assets/app.2.js", "Available-Dictionary", avail)
		if cl := head.Header.Get("Content-Length"); cl != "" {
			t.Errorf("%s: HEAD of an uncached delta announces Content-Length %s (the identity length?)", p.name, cl)
		}
		get, body := send(http.MethodGet, "/assets/app.2.js", "Available-Dictionary", avail)
		if get.Header.Get("Content-Encoding") != "dcz" {
			t.Fatalf("%s: GET naming version 1: Content-Encoding %q, want dcz", p.name, get.Header.Get("Content-Encoding"))
		}
		same("delta", get, head, mirrored...)

		// The GET's delta is cached now: the HEAD knows its length.
		head, _ = send(http.MethodHead, "/assets/app.2.js", "Available-Dictionary", avail)
		same("cached delta", get, head, mirrored...)
		if cl := head.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) {
			t.Errorf("%s: HEAD of a cached delta: Content-Length %q, want the GET's %d bytes", p.name, cl, len(body))
		}
		if got := counterValue(t, c.Metrics(), `caddy_dictionary_hits_total{encoding="dcz"}`); got != hits+1 {
			t.Errorf("%s: dcz hits went from %v to %v over one GET and two HEADs, want +1", p.name, hits, got)
		}
	}
}

// varyTokens is the set of field names in Vary field values, lowercased
// and sorted.
func varyTokens(values []string) []string {
	var tokens []string
	for _, v := range values {
		for tok := range strings.SplitSeq(v, ",") {
			if tok = strings.ToLower(strings.TrimSpace(tok)); tok != "" && !slices.Contains(tokens, tok) {
				tokens = append(tokens, tok)
			}
		}
	}
	slices.Sort(tokens)
	return tokens
}
