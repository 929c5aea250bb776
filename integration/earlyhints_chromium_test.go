package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/loopback"
	"github.com/caddy-edgekit/edgekit/internal/testchromium"
)

// originThinks is how long the origin takes before a page's header: the
// time the browser would sit idle without hints.
const originThinks = 400 * time.Millisecond

// linkLatency is the one-way latency of the h2 run's link between the
// browser and the PoP, small beside originThinks.
const linkLatency = 25 * time.Millisecond

type hintsPage struct {
	Ran        []bool  `json:"ran"`
	Protocol   string  `json:"protocol"`
	Interim    float64 `json:"interim"`    // firstInterimResponseStart: the 103
	FinalStart float64 `json:"finalStart"` // finalResponseHeadersStart: the page's own header
	Assets     []asset `json:"assets"`
	// From the origin's side: when each asset's request arrived, from the
	// start of the page's request, and how long the page's wait was.
	Arrived map[string]time.Duration `json:"-"`
	Wait    time.Duration            `json:"-"`
}

type asset struct {
	Name      string  `json:"name"`
	StartTime float64 `json:"startTime"`
	Initiator string  `json:"initiatorType"`
}

// TestEarlyHintsChromium: Debian's headless Chromium loads a page whose
// origin takes originThinks before its header, through a Caddy PoP with
// early_hints, twice with fresh profiles (no HTTP cache between them), over
// HTTP/2 and HTTP/3. The first load learns: no 103, the page's two scripts
// and stylesheet start (Resource Timing) after its header and reach the
// origin after its wait. The second gets the PoP's 103 before the page's
// header (firstInterimResponseStart): each asset's Resource Timing entry
// has initiatorType early-hints, its request reached the origin during the
// page's wait, and the origin served it once in that load (the page used
// the hinted response, not a second fetch).
func TestEarlyHintsChromium(t *testing.T) {
	chromium := testchromium.Path(t)
	for _, proto := range []string{"h2", "h3"} {
		t.Run(proto, func(t *testing.T) { earlyHintsChromium(t, chromium, proto) })
	}
}

func earlyHintsChromium(t *testing.T, chromium, proto string) {
	var mu sync.Mutex
	hits := map[string]int{}
	var pageAt, pageDone time.Time        // when the origin began and ended the page's wait
	arrived := map[string]time.Duration{} // asset -> when its request reached the origin, from pageAt
	up := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		if r.URL.Path == "/page" {
			pageAt = time.Now()
		} else {
			arrived[r.URL.Path] = time.Since(pageAt)
		}
		mu.Unlock()
		switch r.URL.Path {
		case "/page": // not "/", which the harness asks for before the test
			time.Sleep(originThinks)
			mu.Lock()
			pageDone = time.Now()
			mu.Unlock()
			h := w.Header()
			h.Set("Content-Type", "text/html; charset=utf-8")
			h.Add("Link", "</app.css>; rel=preload; as=style")
			h.Add("Link", "</a.js>; rel=preload; as=script")
			h.Add("Link", "</b.js>; rel=preload; as=script")
			fmt.Fprint(w, `<!doctype html><html><head><title>hints</title>
<link rel="stylesheet" href="/app.css">
<script src="/a.js"></script>
<script src="/b.js"></script>
</head><body><pre id="out">pending</pre>
<script>
addEventListener("load", () => {
	const nav = performance.getEntriesByType("navigation")[0];
	document.getElementById("out").textContent = JSON.stringify({
		ran: [window.ran_a === true, window.ran_b === true, getComputedStyle(document.body).marginTop === "7px"],
		protocol: nav.nextHopProtocol,
		interim: nav.firstInterimResponseStart || 0,
		finalStart: nav.finalResponseHeadersStart || nav.responseStart,
		assets: performance.getEntriesByType("resource").map(e => ({name: new URL(e.name).pathname, startTime: e.startTime, initiatorType: e.initiatorType})),
	});
});
</script></body></html>`)
		case "/a.js", "/b.js":
			w.Header().Set("Content-Type", "text/javascript")
			w.Header().Set("Cache-Control", "max-age=60")
			fmt.Fprintf(w, "window.ran_%s = true;\n", strings.TrimSuffix(r.URL.Path[1:], ".js"))
		case "/app.css":
			w.Header().Set("Content-Type", "text/css")
			w.Header().Set("Cache-Control", "max-age=60")
			fmt.Fprint(w, "body { margin-top: 7px }\n")
		default:
			http.NotFound(w, r)
		}
	}))
	c := StartCaddy(t, `
https://localhost:{$HTTPS_PORT} {
	tls internal
	early_hints
	reverse_proxy `+up+`
}`)
	c.WaitHTTPS(t)
	spki := intermediateSPKI(t, c)
	// Over TCP the browser reaches the PoP through a link with a one-way
	// latency, as any real one has. On bare loopback a 103 sent the moment
	// the request arrives can reach Chromium in the same read as the PoP's
	// SETTINGS, before its HTTP/2 transaction has finished sending the
	// request and waits for headers, and Chromium drops it (the netlog shows
	// HTTP2_SESSION_RECV_HEADERS :status 103 without
	// HTTP_TRANSACTION_READ_EARLY_HINTS_RESPONSE_HEADERS); no real network
	// delivers a reply that fast. The relay listens on an address of its
	// own, on the PoP's port (the page's URLs name it). QUIC (h3) goes to
	// Caddy directly.
	tcpHost := c.Host
	if proto == "h2" {
		relay := StartTCPRelay(t, net.JoinHostPort(loopback.Claim(t), strconv.Itoa(c.HTTPSPort)), net.JoinHostPort(c.Host, strconv.Itoa(c.HTTPSPort)), linkLatency)
		tcpHost, _, _ = net.SplitHostPort(relay.Addr())
	}

	load := func(name string) hintsPage {
		t.Helper()
		mu.Lock()
		clear(hits)
		clear(arrived)
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		args := testchromium.Args(t.TempDir(),
			"--ignore-certificate-errors-spki-list="+spki,
			"--host-resolver-rules=MAP localhost "+tcpHost,
			"--virtual-time-budget=10000",
		)
		if proto == "h2" {
			// Caddy's Alt-Svc (in the 103 too) would have Chromium try
			// QUIC at the proxy's address.
			args = append(args, "--disable-quic")
		}
		if proto == "h3" {
			args = append(args, "--enable-quic", fmt.Sprintf("--origin-to-force-quic-on=localhost:%d", c.HTTPSPort))
		}
		dom, stderr := testchromium.DumpDOM(ctx, t, chromium, args, c.HTTPSURL("/page"))
		_, rest, _ := strings.Cut(string(dom), `<pre id="out">`)
		text, _, _ := strings.Cut(rest, "</pre>")
		var page hintsPage
		if err := json.Unmarshal([]byte(html.UnescapeString(text)), &page); err != nil {
			t.Fatalf("%s load: page result %q: %v\nchromium stderr:\n%s", name, text, err, stderr)
		}
		if fmt.Sprint(page.Ran) != "[true true true]" || page.Protocol != proto || len(page.Assets) != 3 {
			t.Fatalf("%s load: %+v; want both scripts and the style applied over %s", name, page, proto)
		}
		mu.Lock()
		defer mu.Unlock()
		page.Arrived = map[string]time.Duration{}
		for k, v := range arrived {
			page.Arrived[k] = v
		}
		page.Wait = pageDone.Sub(pageAt)
		for _, p := range []string{"/a.js", "/b.js", "/app.css"} {
			if hits[p] != 1 {
				t.Errorf("%s load: the origin served %s %d times, want once", name, p, hits[p])
			}
		}
		return page
	}

	first := load("first")
	if first.Interim != 0 {
		t.Fatalf("first load got a 103 (firstInterimResponseStart %v) before anything was learned", first.Interim)
	}
	for _, a := range first.Assets {
		if a.StartTime < first.FinalStart {
			t.Errorf("first load: %s started at %.1f ms, before the page's header at %.1f ms, without a hint", a.Name, a.StartTime, first.FinalStart)
		}
	}
	second := load("second")
	if second.Interim == 0 || second.Interim >= second.FinalStart {
		t.Fatalf("second load: firstInterimResponseStart %v, final header %v; want the PoP's 103 first", second.Interim, second.FinalStart)
	}
	// Chromium (Debian's, here) reports an early-hints entry's startTime
	// when the document takes the preloaded response, after the page's
	// header, not when the hint fetch began: the proof that the fetch ran
	// during the origin's wait is its initiatorType and the time its
	// request reached the origin.
	for _, a := range second.Assets {
		if a.Initiator != "early-hints" {
			t.Errorf("second load: %s initiatorType %q, want early-hints: the page did not use the hinted response", a.Name, a.Initiator)
		}
		if at := second.Arrived[a.Name]; at >= second.Wait {
			t.Errorf("second load: %s reached the origin %v after the page's request, not within its %v wait", a.Name, at, second.Wait)
		}
	}
	for _, a := range first.Assets {
		if a.Initiator == "early-hints" || first.Arrived[a.Name] < first.Wait {
			t.Errorf("first load: %s initiator %q, reached the origin at %v within the page's %v wait, with nothing learned", a.Name, a.Initiator, first.Arrived[a.Name], first.Wait)
		}
	}
	t.Logf("origin side: first load assets arrived %v, second %v, page wait %v", first.Arrived, second.Arrived, second.Wait)
	t.Logf("%s: page header at %.1f ms; first load assets %+v; second load 103 at %.1f ms, assets %+v", proto, second.FinalStart, first.Assets, second.Interim, second.Assets)
}
