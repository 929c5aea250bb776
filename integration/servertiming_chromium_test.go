package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/loopback"
	"github.com/caddy-edgekit/edgekit/internal/testchromium"
)

// browserTiming is one PerformanceEntry as the page reports it.
type browserTiming struct {
	Name         string `json:"name"`
	ServerTiming []struct {
		Name        string  `json:"name"`
		Duration    float64 `json:"duration"`
		Description string  `json:"description"`
	} `json:"serverTiming"`
}

// timingLog is the PoP's debug line for one request (servertiming's log).
type timingLog struct {
	Logger       string `json:"logger"`
	Msg          string `json:"msg"`
	Host         string `json:"host"`
	Path         string `json:"path"`
	Client       string `json:"client"`
	EdgeNS       *int64 `json:"edge_ns"`
	OriginNS     *int64 `json:"origin_ns"`
	OriginReused *bool  `json:"origin_reused"`
	OriginDialNS *int64 `json:"origin_dial_ns"`
	OriginTLSNS  *int64 `json:"origin_tls_ns"`
	RTTNS        *int64 `json:"rtt_ns"`
}

func timingLogs(t *testing.T, logs string) []timingLog {
	t.Helper()
	var out []timingLog
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l timingLog
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Logger == "http.handlers.server_timing" && l.Msg == "server timing" {
			out = append(out, l)
		}
	}
	return out
}

// expected is what the entries must say according to the log: name ->
// duration in ms (as sent: to the microsecond) or desc.
func (l timingLog) expected() map[string]string {
	ms := func(ns int64) string { return fmt.Sprintf("dur=%.3f", float64(ns/1000)/1000) }
	m := map[string]string{"client": "desc=" + l.Client}
	if l.EdgeNS != nil {
		m["edge"] = ms(*l.EdgeNS)
	}
	if l.OriginNS != nil {
		m["origin"] = ms(*l.OriginNS)
		m["origin-conn"] = map[bool]string{true: "desc=reused", false: "desc=new"}[*l.OriginReused]
	}
	if l.OriginDialNS != nil {
		m["origin-dial"] = ms(*l.OriginDialNS)
	}
	if l.OriginTLSNS != nil {
		m["origin-tls"] = ms(*l.OriginTLSNS)
	}
	if l.RTTNS != nil {
		m["rtt"] = ms(*l.RTTNS)
	}
	return m
}

// seen is what the browser read, in the same form.
func (b browserTiming) seen() map[string]string {
	m := map[string]string{}
	for _, e := range b.ServerTiming {
		if e.Description != "" {
			m[e.Name] = "desc=" + e.Description
		} else {
			// The page's double, printed back to the microsecond.
			m[e.Name] = fmt.Sprintf("dur=%.3f", math.Round(e.Duration*1000)/1000)
		}
	}
	return m
}

// waitCert waits until the Caddy's HTTPS listener presents a certificate
// for name (Caddy issues each site's asynchronously).
func waitCert(t *testing.T, c *Caddy, name string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", c.HTTPSAddr(), &tls.Config{ServerName: name, InsecureSkipVerify: true})
		if err != nil {
			continue
		}
		certs := conn.ConnectionState().PeerCertificates
		conn.Close()
		if len(certs) > 0 && slices.Contains(certs[0].DNSNames, name) {
			return
		}
	}
	t.Fatalf("no certificate for %s", name)
}

// TestServerTimingChromium: Debian's headless Chromium loads, through a
// Caddy PoP in front of an origin on its own loopback address, a page that
// loads a same-origin script and two cross-origin ones (one site sends
// Timing-Allow-Origin for the page, the other none), over HTTP/2 and over
// HTTP/3. The page reads the Performance API's serverTiming of the
// navigation and of each script. For each, the names and values the browser
// read must be those the PoP logged (its debug line holds the measured
// durations in nanoseconds, not the header); the cross-origin script
// without Timing-Allow-Origin must show none, although the PoP sent them.
func TestServerTimingChromium(t *testing.T) {
	chromium := testchromium.Path(t)
	for _, proto := range []string{"h2", "h3"} {
		t.Run(proto, func(t *testing.T) { serverTimingChromium(t, chromium, proto) })
	}
}

func serverTimingChromium(t *testing.T, chromium, proto string) {
	host := loopback.Claim(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var port int // the PoP's HTTPS port, for the page's URLs
	origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond) // the origin's work
		name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/"), ".js")
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><html><head><title>server timing</title>
<script src="/app.js"></script>
<script src="https://tao.localhost:%[1]d/tao.js"></script>
<script src="https://notao.localhost:%[1]d/notao.js"></script>
</head><body><pre id="out">pending</pre>
<script>
addEventListener("load", () => {
	const pick = e => ({name: e.name, serverTiming: e.serverTiming.map(s => ({name: s.name, duration: s.duration, description: s.description}))});
	document.getElementById("out").textContent = JSON.stringify({
		ran: [window.ran_app, window.ran_tao, window.ran_notao],
		protocols: performance.getEntriesByType("resource").map(e => e.nextHopProtocol).concat(performance.getEntriesByType("navigation").map(e => e.nextHopProtocol)),
		entries: performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource")).map(pick),
	});
});
</script></body></html>`, port)
		case "/app.js", "/tao.js", "/notao.js":
			w.Header().Set("Content-Type", "text/javascript")
			w.Header().Set("Cache-Control", "no-store")
			fmt.Fprintf(w, "window.ran_%s = true;\n", name)
		default:
			http.NotFound(w, r)
		}
	}))
	origin.Listener.Close()
	origin.Listener = ln
	origin.Start()
	t.Cleanup(origin.Close)
	up := ln.Addr().String()

	c := StartCaddyWith(t, Options{Global: "log {\n\t\tlevel DEBUG\n\t}"}, `
https://localhost:{$HTTPS_PORT} {
	tls internal
	server_timing
	reverse_proxy `+up+`
}
https://tao.localhost:{$HTTPS_PORT} {
	tls internal
	server_timing {
		timing_allow_origin https://localhost:{$HTTPS_PORT}
	}
	reverse_proxy `+up+`
}
https://notao.localhost:{$HTTPS_PORT} {
	tls internal
	server_timing
	reverse_proxy `+up+`
}`)
	port = c.HTTPSPort
	c.WaitHTTPS(t)
	for _, name := range []string{"localhost", "tao.localhost", "notao.localhost"} {
		waitCert(t, c, name)
	}
	spki := intermediateSPKI(t, c)
	before := len(timingLogs(t, c.Logs())) // the harness's own requests

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := testchromium.Args(t.TempDir(),
		"--ignore-certificate-errors-spki-list="+spki,
		fmt.Sprintf("--host-resolver-rules=MAP localhost %[1]s, MAP tao.localhost %[1]s, MAP notao.localhost %[1]s", c.Host),
		"--virtual-time-budget=10000",
	)
	wantProto := "h2"
	if proto == "h3" {
		wantProto = "h3"
		args = append(args, "--enable-quic", fmt.Sprintf("--origin-to-force-quic-on=localhost:%[1]d,tao.localhost:%[1]d,notao.localhost:%[1]d", c.HTTPSPort))
	}
	dom, stderr := testchromium.DumpDOM(ctx, t, chromium, args, c.HTTPSURL("/"))
	_, rest, _ := strings.Cut(string(dom), `<pre id="out">`)
	text, _, _ := strings.Cut(rest, "</pre>")
	var page struct {
		Ran       []bool          `json:"ran"`
		Protocols []string        `json:"protocols"`
		Entries   []browserTiming `json:"entries"`
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(text)), &page); err != nil {
		t.Fatalf("page result %q: %v\nchromium stderr:\n%s", text, err, stderr)
	}
	if !slices.Equal(page.Ran, []bool{true, true, true}) {
		t.Fatalf("scripts ran %v: %s", page.Ran, text)
	}
	// The browser hides the protocol too from a cross-origin resource
	// without Timing-Allow-Origin: one empty.
	if spoke := slices.DeleteFunc(slices.Clone(page.Protocols), func(p string) bool { return p == "" }); len(spoke) != 3 || slices.ContainsFunc(spoke, func(p string) bool { return p != wantProto }) {
		t.Fatalf("Chromium spoke %q, want %s for the page and two scripts", page.Protocols, wantProto)
	}

	logs := timingLogs(t, c.Logs())[before:]
	checked := map[string]bool{}
	for _, e := range page.Entries {
		u, err := url.Parse(e.Name)
		if err != nil {
			t.Fatal(err)
		}
		var logged *timingLog
		for i := range logs {
			if logs[i].Host == u.Host && logs[i].Path == u.Path {
				if logged != nil {
					t.Fatalf("%s logged twice", e.Name)
				}
				logged = &logs[i]
			}
		}
		if logged == nil {
			t.Fatalf("no PoP log line for %s; lines: %+v", e.Name, logs)
		}
		want, got := logged.expected(), e.seen()
		if !strings.HasPrefix(logged.Client, wantProto+" tls=") {
			t.Errorf("%s: PoP logged client %q over %s", e.Name, logged.Client, wantProto)
		}
		if u.Hostname() == "notao.localhost" {
			// The PoP sent them (it logged them); the browser hides them
			// from a page of another origin without Timing-Allow-Origin.
			if len(got) != 0 {
				t.Errorf("%s: cross-origin without Timing-Allow-Origin, yet the page read %v", e.Name, got)
			}
			checked[u.Host+u.Path] = true
			continue
		}
		for _, name := range []string{"edge", "origin", "origin-conn", "client"} {
			if _, ok := want[name]; !ok {
				t.Errorf("%s: the PoP logged no %s: %+v", e.Name, name, *logged)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: the page read\n  %v\nthe PoP logged\n  %v", e.Name, got, want)
		}
		checked[u.Host+u.Path] = true
	}
	for _, r := range []string{"/", "/app.js", "/tao.js", "/notao.js"} {
		h := "localhost"
		if r == "/tao.js" || r == "/notao.js" {
			h = strings.TrimSuffix(r[1:], ".js") + ".localhost"
		}
		if !checked[fmt.Sprintf("%s:%d%s", h, c.HTTPSPort, r)] {
			t.Errorf("the page reported no entry for %s%s: %+v", h, r, page.Entries)
		}
	}
}
