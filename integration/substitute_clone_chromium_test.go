package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/testchromium"
)

// TestSubstituteCloneChromium: a small real-looking site on an origin
// Caddy (https://origin.example:<port>: a redirect from /, a cookie for
// Domain=origin.example, a Content-Security-Policy allowing only its own
// host, a Link preload header and preload links, absolute links to its own
// host in HTML, CSS and JavaScript, a fetch that is redirected) is cloned
// through a PoP Caddy under https://clone.example:<port>, with substitute's
// rules applied to the body and to the headers a clone needs. Headless
// Chromium opens the clone's / over HTTP/2 and over HTTP/3 (QUIC forced),
// both names resolved to the two Caddies and both local CAs pinned, so a
// request that left the clone would reach the origin directly and show in
// its log. Every request in the PoP's log must be for the clone's host,
// over the protocol under test; every request in the origin's log must
// have come through the PoP; the page's script must have run (the CSP was
// rewritten), seen its cookie (the Domain was rewritten), and fetched
// through the redirect (Location rewritten).
func TestSubstituteCloneChromium(t *testing.T) {
	chromium := testchromium.Path(t)
	for _, tc := range []struct{ name, proto string }{{"h2", "HTTP/2.0"}, {"h3", "HTTP/3.0"}} {
		t.Run(tc.name, func(t *testing.T) { substituteCloneChromium(t, chromium, tc.proto) })
	}
}

func substituteCloneChromium(t *testing.T, chromium, proto string) {
	originLog := filepath.Join(t.TempDir(), "origin.log")
	popLog := filepath.Join(t.TempDir(), "pop.log")
	// The origin: every URL it writes names its own host and port.
	const self = "https://origin.example:{$HTTPS_PORT}"
	page := `<!doctype html>
<html><head><meta charset="utf-8"><title>Origin shop</title>
<link rel="stylesheet" href="` + self + `/style.css">
<link rel="preload" href="` + self + `/logo.svg" as="image">
<link rel="canonical" href="` + self + `/home">
</head><body>
<h1>Origin shop</h1>
<img src="` + self + `/logo.svg" alt="logo">
<p><a href="` + self + `/about">About us</a></p>
<script src="` + self + `/app.js"></script>
</body></html>`
	script := `(async () => {
	const d = document.documentElement.dataset;
	d.cookie = document.cookie;
	d.host = location.host;
	try {
		const r = await fetch("` + self + `/api/moved");
		const j = await r.json();
		d.api = j.ok;
		d.apiurl = r.url;
	} catch (e) {
		d.api = "error: " + e;
	}
	d.done = "1";
})();`
	// The CSP lists only the origin's host: the clone's page runs its
	// script and loads its style only if the policy names the clone.
	csp := "default-src 'none'; script-src " + self + "; style-src " + self + "; img-src " + self + "; connect-src " + self
	origin := StartCaddyWith(t, Options{Global: "servers {\n\t\tlog_credentials\n\t}"}, `
https://origin.example:{$HTTPS_PORT} {
	tls internal
	log {
		output file `+originLog+`
		format json
	}
	encode gzip
	redir / `+self+`/home 302
	handle /home {
		header Content-Type "text/html; charset=utf-8"
		header Set-Cookie "sid=abc123; Domain=origin.example; Path=/; Secure; SameSite=Lax"
		header Content-Security-Policy "`+csp+`"
		header Link "<`+self+`/style.css>; rel=preload; as=style"
		respond `+"`"+page+"`"+` 200
	}
	handle /style.css {
		header Content-Type "text/css"
		respond "h1 { color: #123; background: url(`+self+`/bg.svg) }" 200
	}
	handle /app.js {
		header Content-Type "text/javascript"
		respond `+"`"+script+"`"+` 200
	}
	@svg path /logo.svg /bg.svg
	handle @svg {
		header Content-Type "image/svg+xml"
		respond "<svg xmlns='http://www.w3.org/2000/svg' width='8' height='8'><rect width='8' height='8'/></svg>" 200
	}
	handle /api/moved {
		redir `+self+`/api/data 301
	}
	handle /api/data {
		header Content-Type "application/json"
		respond "{\"ok\": \"yes\"}" 200
	}
	handle {
		respond 404
	}
}`)
	originHost := fmt.Sprintf("origin.example:%d", origin.HTTPSPort)
	pop := StartCaddyWith(t, Options{Global: "servers {\n\t\tlog_credentials\n\t}"}, fmt.Sprintf(`
https://clone.example:{$HTTPS_PORT} {
	tls internal
	log {
		output file %[1]s
		format json
	}
	substitute {
		replace %[2]s {hostport}
		replace origin.example {host}
		headers %[3]s
	}
	reverse_proxy https://%[4]s {
		header_up Host %[2]s
		transport http {
			tls_insecure_skip_verify
			tls_server_name origin.example
		}
	}
}`, popLog, originHost, substituteHeaderFields, origin.HTTPSAddr()))
	waitTLSName(t, origin, "origin.example")
	waitTLSName(t, pop, "clone.example")
	cloneHost := fmt.Sprintf("clone.example:%d", pop.HTTPSPort)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := testchromium.Args(t.TempDir(),
		"--ignore-certificate-errors-spki-list="+intermediateSPKI(t, pop)+","+intermediateSPKI(t, origin),
		fmt.Sprintf("--host-resolver-rules=MAP clone.example %s, MAP origin.example %s", pop.Host, origin.Host),
		"--virtual-time-budget=10000",
	)
	if proto == "HTTP/3.0" {
		args = append(args, "--enable-quic", "--origin-to-force-quic-on="+cloneHost)
	}
	dom, stderr := testchromium.DumpDOM(ctx, t, chromium, args, "https://"+cloneHost+"/")
	// The readiness probes (waitTLSName) are the test's, not the page's.
	notProbe := func(e accessEntry) bool { return e.Request.URI == readyPath }
	popEntries := slices.DeleteFunc(readAccessLog(t, popLog), notProbe)
	originEntries := slices.DeleteFunc(readAccessLog(t, originLog), notProbe)
	report := func() string {
		var b strings.Builder
		for _, e := range popEntries {
			fmt.Fprintf(&b, "\n  pop:    %s %s%s %d", e.Request.Proto, e.Request.Host, e.Request.URI, e.Status)
		}
		for _, e := range originEntries {
			fmt.Fprintf(&b, "\n  origin: %s %s%s %d X-Forwarded-Host %v", e.Request.Proto, e.Request.Host, e.Request.URI, e.Status, e.Request.Headers["X-Forwarded-Host"])
		}
		return b.String()
	}
	var paths []string
	for _, e := range popEntries {
		paths = append(paths, e.Request.URI)
		if e.Request.Host != cloneHost {
			t.Errorf("PoP served %s%s: not the clone's host", e.Request.Host, e.Request.URI)
		}
		if e.Request.Proto != proto {
			t.Errorf("PoP: %s over %s, want %s", e.Request.URI, e.Request.Proto, proto)
		}
	}
	for _, e := range originEntries {
		if fwd := strings.Join(e.Request.Headers["X-Forwarded-Host"], ","); fwd != cloneHost {
			t.Errorf("origin served %s%s to the browser directly (X-Forwarded-Host %q): the page left the clone", e.Request.Host, e.Request.URI, fwd)
		}
	}
	for _, want := range []string{"/", "/home", "/style.css", "/app.js", "/logo.svg", "/api/moved", "/api/data"} {
		if !slices.Contains(paths, want) {
			t.Errorf("the page never requested %s from the clone", want)
		}
	}
	for _, e := range popEntries {
		if e.Request.URI == "/api/data" {
			if c := strings.Join(e.Request.Headers["Cookie"], "; "); !strings.Contains(c, "sid=abc123") {
				t.Errorf("/api/data came without the cookie set for the clone: Cookie %q", c)
			}
		}
	}
	for _, marker := range []string{`data-done="1"`, `data-api="yes"`, `data-cookie="sid=abc123"`,
		`data-host="` + cloneHost + `"`, `data-apiurl="https://` + cloneHost + `/api/data"`} {
		if !bytes.Contains(dom, []byte(marker)) {
			t.Errorf("the page lacks %s", marker)
		}
	}
	if strings.Contains(string(dom), "origin.example") {
		t.Errorf("the clone's page still names origin.example")
	}
	if t.Failed() {
		t.Logf("requests:%s\nDOM: %.2000s\nchromium: %s", report(), dom, grepLines(stderr, "CONSOLE"))
	} else {
		t.Logf("%d requests through the PoP over %s, %d at the origin, all through the PoP:%s", len(popEntries), proto, len(originEntries), report())
	}
}

// readyPath is what waitTLSName asks for.
const readyPath = "/__ready"

// waitTLSName waits until c answers HTTPS for the site name (Caddy issues
// its certificate asynchronously after start).
func waitTLSName(t *testing.T, c *Caddy, name string) {
	t.Helper()
	addr := c.HTTPSAddr()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: name},
	}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer client.CloseIdleConnections()
	var lastErr error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := client.Get(fmt.Sprintf("https://%s:%d%s", name, c.HTTPSPort, readyPath))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return
		}
		lastErr = err
	}
	t.Fatalf("HTTPS for %s on %s never answered: %v", name, addr, lastErr)
}
