package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/loopback"
	"github.com/caddy-edgekit/edgekit/internal/testchromium"
)

// labHintAssets are the page's three scripts and its stylesheet, each
// named in the origin's Link fields and in the page.
var labHintAssets = []string{"a.js", "b.js", "c.js", "app.css"}

// labHintsOrigin is the lab's far origin for the early-hints run: it
// answers a page at once (the whole saving is distance, not the origin's
// work) and records, per load, when the page's request and each asset's
// request arrived.
type labHintsOrigin struct {
	mu     sync.Mutex
	pageAt time.Time
	hits   map[string]int
	// arrived is when each asset's request reached the origin, from the
	// page's request.
	arrived map[string]time.Duration
}

// reset forgets the previous load.
func (o *labHintsOrigin) reset() {
	o.mu.Lock()
	o.pageAt = time.Time{}
	o.hits = map[string]int{}
	o.arrived = map[string]time.Duration{}
	o.mu.Unlock()
}

func (o *labHintsOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	dir, name := r.URL.Path[:strings.LastIndexByte(r.URL.Path, '/')+1], r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	o.mu.Lock()
	o.hits[name]++
	if name == "page" {
		o.pageAt = time.Now()
	} else if !o.pageAt.IsZero() && slices.Contains(labHintAssets, name) { // not Chromium's /favicon.ico
		o.arrived[name] = time.Since(o.pageAt)
	}
	o.mu.Unlock()
	h := w.Header()
	switch name {
	case "page":
		h.Set("Content-Type", "text/html; charset=utf-8")
		var tags strings.Builder
		for _, a := range labHintAssets {
			if strings.HasSuffix(a, ".css") {
				h.Add("Link", "<"+dir+a+">; rel=preload; as=style")
				fmt.Fprintf(&tags, "<link rel=\"stylesheet\" href=\"%s%s\">\n", dir, a)
			} else {
				h.Add("Link", "<"+dir+a+">; rel=preload; as=script")
				fmt.Fprintf(&tags, "<script src=\"%s%s\"></script>\n", dir, a)
			}
		}
		fmt.Fprint(w, `<!doctype html><html><head><title>lab hints</title>
`+tags.String()+`</head><body><pre id="out">pending</pre>
<script>
addEventListener("load", () => {
	const nav = performance.getEntriesByType("navigation")[0];
	document.getElementById("out").textContent = JSON.stringify({
		ran: [window.ran_a === true, window.ran_b === true, window.ran_c === true, getComputedStyle(document.body).marginTop === "7px"],
		protocol: nav.nextHopProtocol,
		interim: nav.firstInterimResponseStart || 0,
		header: nav.finalResponseHeadersStart || nav.responseStart,
		load: nav.loadEventStart,
		assets: performance.getEntriesByType("resource").map(e => ({name: e.name.slice(e.name.lastIndexOf("/") + 1), startTime: e.startTime, responseEnd: e.responseEnd, initiatorType: e.initiatorType})),
	});
});
</script></body></html>`)
	case "a.js", "b.js", "c.js":
		h.Set("Content-Type", "text/javascript")
		h.Set("Cache-Control", "max-age=600")
		fmt.Fprintf(w, "window.ran_%s = true;\n", strings.TrimSuffix(name, ".js"))
	case "app.css":
		h.Set("Content-Type", "text/css")
		h.Set("Cache-Control", "max-age=600")
		fmt.Fprint(w, "body { margin-top: 7px }\n")
	default:
		http.NotFound(w, r)
	}
}

// labHintsLoad is what one page load measured: in the browser (Resource
// Timing and Navigation Timing, ms from the navigation's start) and at
// the origin.
type labHintsLoad struct {
	Ran      []bool  `json:"ran"`
	Protocol string  `json:"protocol"`
	Interim  float64 `json:"interim"` // firstInterimResponseStart: the 103, 0 without
	Header   float64 `json:"header"`  // finalResponseHeadersStart: the page's own header
	Load     float64 `json:"load"`    // loadEventStart
	Assets   []struct {
		Name        string  `json:"name"`
		StartTime   float64 `json:"startTime"`
		ResponseEnd float64 `json:"responseEnd"`
		Initiator   string  `json:"initiatorType"`
	} `json:"assets"`
	// atOrigin is when each asset's request reached the origin, from the
	// page's request; hits how often the origin served each.
	atOrigin map[string]time.Duration
	hits     map[string]int
}

// asset is the entry for name (the zero entry when missing).
func (l *labHintsLoad) asset(name string) (startTime, responseEnd float64, initiator string) {
	for _, a := range l.Assets {
		if a.Name == name {
			return a.StartTime, a.ResponseEnd, a.Initiator
		}
	}
	return 0, 0, ""
}

// TestEdgeLabEarlyHints is the edge lab's page load with early hints: a
// phone 20 ms (round trip) from a Caddy PoP, the origin 250 ms from the
// PoP. Headless Chromium loads a page with three scripts and a stylesheet
// (go test -run TestEdgeLabEarlyHints -v ./integration/ prints the table),
// over HTTP/2 and HTTP/3, under /on/ (early_hints) and /off/ (none), twice
// each: the first load of /on/ teaches the PoP the page's Link fields, the
// second gets them in a 103 before the request goes to the origin.
//
// Each load has a fresh browser profile: an empty HTTP cache, as a first
// visit has, so a later load measures the hints and not the cache. The
// assets stay cacheable (max-age), as the assets a site hints are: with
// no-store instead, Debian's Chromium 156 fetched each asset twice on the
// hinted load, once for the hint and again for the page after its header,
// and the hint bought nothing (tried once: the origin served each asset
// twice and initiatorType was "link"). Chromium hands the page a hinted
// response only when it may reuse it, so no-store would measure that rule,
// not the hints.
//
// The first loads are not hinted on either side; the later ones are
// measured twice each, interleaved, and each side's fastest is compared
// (a loaded machine only adds time).
//
// With the hints each asset's request reaches the origin about one long
// round trip earlier (measured at the origin: in the browser, Chromium
// reports an early-hints entry's startTime when the page takes the
// preloaded response, not when its fetch began), and the page's load event
// comes ~250 ms sooner. That Chromium used the hints: each asset's entry
// has initiatorType early-hints, the origin served each asset once in the
// load, and its request reached the origin less than a long round trip
// after the page's: before the browser could have had the page's header.
func TestEdgeLabEarlyHints(t *testing.T) {
	chromium := testchromium.Path(t)
	origin := &labHintsOrigin{}
	origin.reset()
	originSrv := httptest.NewUnstartedServer(origin)
	originSrv.EnableHTTP2 = true
	originSrv.StartTLS()
	t.Cleanup(originSrv.Close)
	long := StartTCPRelay(t, "127.0.0.1:0", originSrv.Listener.Addr().String(), labLongOneWay)

	pop := StartCaddy(t, fmt.Sprintf(`https://localhost:{$HTTPS_PORT} {
	tls internal
	@hinted path /on/*
	early_hints @hinted
	# One warm HTTP/2 connection to the far origin carries every request.
	reverse_proxy https://%s {
		header_up Host {upstream_hostport}
		transport http {
			tls_insecure_skip_verify
			keepalive 5m
		}
	}
}`, long.Addr()))
	pop.WaitHTTPS(t)
	spki := intermediateSPKI(t, pop)
	// The short link, TCP and UDP, on an address of its own and the PoP's
	// port: the page's URLs name localhost:<port>, and the browser
	// resolves localhost to the link.
	shortHost := loopback.Claim(t)
	shortAddr := net.JoinHostPort(shortHost, strconv.Itoa(pop.HTTPSPort))
	StartTCPRelay(t, shortAddr, pop.HTTPSAddr(), labShortOneWay)
	StartUDPRelay(t, shortAddr, pop.HTTPSAddr(), labShortOneWay)
	// Open the PoP's connection to the origin before anything is measured.
	if resp, body := Get(t, pop.Client(), pop.HTTPSURL("/warm")); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("warming the PoP's origin connection: %d %q, want the origin's 404", resp.StatusCode, body)
	}

	var table strings.Builder
	fmt.Fprintf(&table, "%-5s %-5s %-4s %7s %7s %7s | %-31s | %-31s | %s\n", "proto", "hints", "load", "103", "header", "load",
		"startTime a.js b.js c.js css", "responseEnd a.js b.js c.js css", "at origin after page a.js b.js c.js css")
	for _, proto := range []string{"h2", "h3"} {
		t.Run(proto, func(t *testing.T) {
			loads := map[string]*labHintsLoad{}
			// Interleaved, so a busy machine weighs on both sides alike.
			for _, run := range labHintsRuns {
				hints, n, _ := strings.Cut(run, " ")
				l := labHintsRun(t, chromium, origin, pop, spki, shortHost, proto, "/"+hints+"/"+proto+"/")
				loads[run] = l
				labHintsRow(&table, proto, hints, n, l)
			}
			labHintsCheck(t, loads)
		})
	}
	t.Logf("phone %v RTT from the PoP, origin %v RTT from it; ms from the navigation's start (origin: from the page's request)\n%s",
		2*labShortOneWay, 2*labLongOneWay, table.String())
}

// labHintsRuns are one protocol's loads in order: "on 1" teaches the PoP,
// "on 2" and "on 3" are hinted.
var labHintsRuns = []string{"off 1", "on 1", "off 2", "on 2", "off 3", "on 3"}

// labHintsRun loads dir+"page" in a fresh Chromium over proto through the
// short link and returns what the page and the origin measured.
func labHintsRun(t *testing.T, chromium string, origin *labHintsOrigin, pop *Caddy, spki, shortHost, proto, dir string) *labHintsLoad {
	t.Helper()
	origin.reset()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	args := testchromium.Args(t.TempDir(),
		"--ignore-certificate-errors-spki-list="+spki,
		"--host-resolver-rules=MAP localhost "+shortHost,
	)
	if proto == "h2" {
		// Caddy's Alt-Svc would otherwise move Chromium to QUIC.
		args = append(args, "--disable-quic")
	} else {
		args = append(args, "--enable-quic", fmt.Sprintf("--origin-to-force-quic-on=localhost:%d", pop.HTTPSPort))
	}
	dom, stderr := testchromium.DumpDOM(ctx, t, chromium, args, pop.HTTPSURL(dir+"page"))
	_, rest, _ := strings.Cut(string(dom), `<pre id="out">`)
	text, _, _ := strings.Cut(rest, "</pre>")
	var l labHintsLoad
	if err := json.Unmarshal([]byte(html.UnescapeString(text)), &l); err != nil {
		t.Fatalf("%s: page result %q: %v\nchromium stderr:\n%s", dir, text, err, stderr)
	}
	if fmt.Sprint(l.Ran) != "[true true true true]" || l.Protocol != proto || len(l.Assets) != len(labHintAssets) {
		t.Fatalf("%s: %+v; want the three scripts run and the style applied over %s", dir, l, proto)
	}
	// Copies: a request after the page's load (Chromium's /favicon.ico)
	// still writes the origin's maps.
	origin.mu.Lock()
	l.atOrigin, l.hits = maps.Clone(origin.arrived), maps.Clone(origin.hits)
	origin.mu.Unlock()
	return &l
}

// labHintsCheck holds one protocol's four loads to what the round trips
// predict.
func labHintsCheck(t *testing.T, loads map[string]*labHintsLoad) {
	t.Helper()
	longRTT := 2 * labLongOneWay
	for run, l := range loads {
		for _, a := range labHintAssets {
			if l.hits[a] != 1 {
				t.Errorf("%s: the origin served %s %d times, want once", run, a, l.hits[a])
			}
		}
		hinted := strings.HasPrefix(run, "on ") && run != "on 1"
		if got := l.Interim != 0; got != hinted {
			t.Errorf("%s: firstInterimResponseStart %.1f ms; want a 103 on the later loads under /on/ only", run, l.Interim)
		}
		if hinted && l.Interim >= l.Header {
			t.Errorf("%s: the 103 at %.1f ms, the page's header at %.1f ms: want the 103 first", run, l.Interim, l.Header)
		}
		for _, a := range labHintAssets {
			_, _, initiator := l.asset(a)
			at := l.atOrigin[a]
			if hinted {
				// Sent before the browser could have had the page's
				// header, which reaches it at least a long round trip
				// after the page's request reached the origin.
				if initiator != "early-hints" || at >= longRTT {
					t.Errorf("%s: %s initiatorType %q, reached the origin %v after the page; want early-hints, within %v: the page did not use the hint", run, a, initiator, at, longRTT)
				}
			} else if initiator == "early-hints" || at < longRTT {
				t.Errorf("%s: %s initiatorType %q, reached the origin %v after the page, without a hint", run, a, initiator, at)
			}
		}
	}
	// Each side's fastest of its measured loads.
	fastest := func(prefix string) (load float64, atOrigin map[string]time.Duration, responseEnd map[string]float64) {
		atOrigin, responseEnd = map[string]time.Duration{}, map[string]float64{}
		for _, run := range []string{prefix + " 2", prefix + " 3"} {
			l := loads[run]
			if load == 0 || l.Load < load {
				load = l.Load
			}
			for _, a := range labHintAssets {
				_, end, _ := l.asset(a)
				if at, ok := atOrigin[a]; !ok || l.atOrigin[a] < at {
					atOrigin[a] = l.atOrigin[a]
				}
				if e, ok := responseEnd[a]; !ok || end < e {
					responseEnd[a] = end
				}
			}
		}
		return load, atOrigin, responseEnd
	}
	onLoad, onAt, onEnd := fastest("on")
	offLoad, offAt, offEnd := fastest("off")
	// About one long round trip earlier: at least 200 ms of 250.
	for _, a := range labHintAssets {
		if d := offAt[a] - onAt[a]; d < 200*time.Millisecond {
			t.Errorf("%s reached the origin %v after the page with hints, %v without: %v earlier, want >= 200ms", a, onAt[a], offAt[a], d)
		}
		if offEnd[a]-onEnd[a] < 200 {
			t.Errorf("%s responseEnd %.1f ms with hints, %.1f without: want >= 200 ms sooner", a, onEnd[a], offEnd[a])
		}
	}
	if d := offLoad - onLoad; d < 180 {
		t.Errorf("load event at %.1f ms with hints, %.1f ms without (fastest of each): %.1f ms sooner, want >= 180 ms", onLoad, offLoad, d)
	}
	t.Logf("fastest load event: %.0f ms with hints, %.0f ms without: %.0f ms sooner", onLoad, offLoad, offLoad-onLoad)
}

// labHintsRow prints one load.
func labHintsRow(w *strings.Builder, proto, hints, n string, l *labHintsLoad) {
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	interim := "-"
	if l.Interim != 0 {
		interim = ms(l.Interim)
	}
	var starts, ends []string
	for _, a := range labHintAssets {
		s, e, _ := l.asset(a)
		starts, ends = append(starts, ms(s)), append(ends, ms(e))
	}
	var at []string
	for _, a := range labHintAssets {
		at = append(at, strconv.FormatInt(l.atOrigin[a].Milliseconds(), 10))
	}
	fmt.Fprintf(w, "%-5s %-5s %-4s %7s %7s %7s | %-31s | %-31s | %s\n", proto, hints, n, interim, ms(l.Header), ms(l.Load),
		strings.Join(starts, " "), strings.Join(ends, " "), strings.Join(at, " "))
}
