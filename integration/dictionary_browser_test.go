package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/testchromium"
)

// intermediateSPKI is the base64 SHA-256 of the SubjectPublicKeyInfo of the
// Caddy's local intermediate CA, which signs its `tls internal` leaves: what
// Chromium's --ignore-certificate-errors-spki-list takes. Chromium keeps
// compression dictionaries only from a connection it trusts, and
// --ignore-certificate-errors does not count as such.
func intermediateSPKI(t *testing.T, c *Caddy) string {
	t.Helper()
	pemBytes, err := os.ReadFile(filepath.Join(c.Dir, "storage", "pki", "authorities", "local", "intermediate.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatal("intermediate.crt: no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// accessEntry is the part of a Caddy access log line the test reads.
type accessEntry struct {
	Request struct {
		Host    string              `json:"host"`
		URI     string              `json:"uri"`
		Proto   string              `json:"proto"`
		Headers map[string][]string `json:"headers"`
	} `json:"request"`
	Status      int                 `json:"status"`
	Size        int                 `json:"size"`
	RespHeaders map[string][]string `json:"resp_headers"`
}

func readAccessLog(t *testing.T, path string) []accessEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var entries []accessEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e accessEntry
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Request.URI != "" {
			entries = append(entries, e)
		}
	}
	return entries
}

// TestDictionaryChromium: Debian's headless Chromium loads a page with
// version 1 of a script from a `tls internal` Caddy (its intermediate
// pinned by SPKI), then loads version 2 of the script. The access log must
// show version 2 sent as dcz or dcb, to a request naming version 1's
// dictionary, and the page must have run version 2 (Chromium decoded the
// delta itself: an independent decoder).
//
// Chromium stores a dictionary asynchronously, after the response that
// carried it: the page cannot know when. So it waits for what the browser
// does: it loads a probe script whose path the dictionary's match pattern
// covers (each time under a new query, past the HTTP cache) until the
// probe's response tells it, in Server-Timing, that its request carried
// Available-Dictionary, waiting between tries on a request to a slow
// origin (real time passes while a fetch is pending, whatever the virtual
// time budget), within a bounded number of tries; then it loads version 2
// once. The probe is outside the dictionary handler, so it is never marked
// as a dictionary itself: when the page tried version 2 directly, a try
// made before version 1 was stored got version 2 marked, and Chromium then
// named that newer dictionary instead of version 1 (seen in CI).
//
// It runs once per coding (the handler offering only that one), so that
// Chromium's own decoders check both: its zstd for dcz, and for dcb its
// Brotli, the one independent decoder of go-brrr's compound dictionaries
// here; and dcz once more over HTTP/3 (QUIC forced for the origin).
func TestDictionaryChromium(t *testing.T) {
	chromium := testchromium.Path(t)
	for _, tc := range []struct{ name, coding, proto string }{
		{"dcz-h2", "dcz", "HTTP/2.0"},
		{"dcb-h2", "dcb", "HTTP/2.0"},
		{"dcz-h3", "dcz", "HTTP/3.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dictionaryChromium(t, chromium, tc.coding, tc.proto)
		})
	}
}

// chromiumTries bounds the page's probes while it waits for
// Chromium to have stored version 1 (about 50 ms apart: 20 s at most).
const chromiumTries = 400

func dictionaryChromium(t *testing.T, chromium, coding, proto string) {
	root := t.TempDir()
	assets := filepath.Join(root, "assets")
	if err := os.Mkdir(assets, 0o755); err != nil {
		t.Fatal(err)
	}
	base, _ := dictionaryVersions(t, t.TempDir())
	// Each version records itself before the library code (which, without
	// React loaded, throws: harmless, the marker is set first).
	v1 := append([]byte(`document.documentElement.dataset.v1="ran";`+"\n"), base...)
	v2 := append([]byte(`document.documentElement.dataset.v2="ran";`+"\n"), base...)
	// Release 2's edits start lines, so that they stay comments wherever
	// they fall in the minified code.
	for i := 1; i < 6; i++ {
		at := bytes.IndexByte(v2[len(v2)*i/6:], '\n')
		if at < 0 {
			break
		}
		at += len(v2)*i/6 + 1
		v2 = append(v2[:at:at], append(fmt.Appendf(nil, "/*release 2, edit %d*/", i), v2[at:]...)...)
	}
	page := `<!doctype html><html><head><title>dictionary</title></head><body>
<script src="/assets/app.1.js"></script>
<script>
// The resource timing entry of url, once the browser has made it.
const timing = url => new Promise(resolve => {
	const po = new PerformanceObserver(list => {
		const e = list.getEntriesByName(url)[0];
		if (e) { po.disconnect(); resolve(e); }
	});
	po.observe({type: "resource", buffered: true});
});
const load = url => new Promise(resolve => {
	const s = document.createElement("script");
	s.src = url;
	s.onload = () => resolve(true);
	s.onerror = () => resolve(false);
	document.body.appendChild(s);
});
addEventListener("load", async () => {
	const root = document.documentElement.dataset;
	for (let n = 1; n <= ` + fmt.Sprint(chromiumTries) + `; n++) {
		const url = new URL("/assets/app.probe.js?try=" + n, location).href;
		if (!await load(url)) { root.done = "error"; return; }
		const named = (await timing(url)).serverTiming.some(t => t.name === "available-dictionary" && t.description !== "");
		if (named) {
			root.tries = n;
			if (!await load("/assets/app.2.js")) { root.done = "error"; return; }
			root.done = root.v2 === "ran" ? "1" : "not-run";
			return;
		}
		await fetch("/wait");
	}
	root.done = "no-dictionary";
});
</script>
</body></html>`
	for name, b := range map[string][]byte{"assets/app.1.js": v1, "assets/app.2.js": v2, "index.html": []byte(page)} {
		if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	accessLog := filepath.Join(t.TempDir(), "access.log")
	// The page's pause between tries: a request that takes 50 ms.
	wait := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(50 * time.Millisecond):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	c := StartCaddy(t, `
https://localhost:{$HTTPS_PORT} {
	tls internal
	log {
		output file `+accessLog+`
		format json
	}
	handle /wait {
		reverse_proxy `+wait+`
	}
	encode br gzip
	header /assets/* Cache-Control "public, max-age=3600"
	header /assets/app.probe.js Server-Timing `+"`"+`available-dictionary;desc="{http.request.header.Available-Dictionary}"`+"`"+`
	@versions path /assets/app.1.js /assets/app.2.js
	dictionary @versions {
		match /assets/app.*.js
		match_dest script
		encodings `+coding+`
	}
	handle /assets/app.probe.js {
		header Content-Type text/javascript
		respond 200
	}
	root * `+root+`
	file_server
}`)
	c.WaitHTTPS(t)
	spki := intermediateSPKI(t, c)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := testchromium.Args(t.TempDir(),
		"--ignore-certificate-errors-spki-list="+spki,
		"--host-resolver-rules=MAP localhost "+c.Host,
		"--virtual-time-budget=15000",
	)
	if proto == "HTTP/3.0" {
		args = append(args, "--enable-quic", fmt.Sprintf("--origin-to-force-quic-on=localhost:%d", c.HTTPSPort))
	}
	dom, stderr := testchromium.DumpDOM(ctx, t, chromium, args, c.HTTPSURL("/"))
	entries := readAccessLog(t, accessLog)
	var first, second *accessEntry
	tries := 0
	for i := range entries {
		switch uri := entries[i].Request.URI; {
		case uri == "/assets/app.1.js":
			first = &entries[i]
		case uri == "/assets/app.2.js":
			second = &entries[i]
		case strings.HasPrefix(uri, "/assets/app.probe.js?try="):
			tries++
		}
	}
	if first == nil || second == nil {
		t.Fatalf("access log lacks the requests for app.1.js or app.2.js:\n%+v\nDOM: %s\nchromium: %s", entries, dom, stderr)
	}
	t.Logf("app.1.js: %s %v, %d bytes; app.2.js (after %d probes): %s %v, %d bytes; its request Accept-Encoding %v, Available-Dictionary %v",
		first.Request.Proto, first.RespHeaders["Content-Encoding"], first.Size, tries,
		second.Request.Proto, second.RespHeaders["Content-Encoding"], second.Size,
		second.Request.Headers["Accept-Encoding"], second.Request.Headers["Available-Dictionary"])
	if got := first.RespHeaders["Use-As-Dictionary"]; len(got) == 0 {
		t.Errorf("app.1.js was not marked: %v", first.RespHeaders)
	}
	if want := availableDictionary(v1); strings.Join(second.Request.Headers["Available-Dictionary"], "") != want {
		t.Fatalf("Chromium did not name version 1 (%s) in Available-Dictionary for app.2.js, after %d probes: %v\nDOM: %.300s", want, tries, second.Request.Headers, bytes.TrimPrefix(dom, []byte("<!DOCTYPE html>\n")))
	}
	if first.Request.Proto != proto || second.Request.Proto != proto {
		t.Errorf("Chromium spoke %s and %s, want %s", first.Request.Proto, second.Request.Proto, proto)
	}
	if ce := strings.Join(second.RespHeaders["Content-Encoding"], ""); ce != coding {
		t.Fatalf("app.2.js went out as %q, want %s", ce, coding)
	}
	if second.Size > len(v2)/10 {
		t.Errorf("app.2.js: %d bytes on the wire for %d", second.Size, len(v2))
	}
	for _, marker := range []string{`data-v1="ran"`, `data-v2="ran"`, `data-done="1"`} {
		if !bytes.Contains(dom, []byte(marker)) {
			t.Errorf("the page lacks %s: version 2 did not run after being decoded by Chromium\nchromium: %s\nDOM: %.300s", marker, grepLines(stderr, "CONSOLE"), bytes.TrimPrefix(dom, []byte("<!DOCTYPE html>\n")))
		}
	}
}
