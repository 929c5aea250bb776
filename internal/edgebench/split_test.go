package edgebench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// The split's arithmetic alone: last mile = TTFB - (edge + dial + tls +
// origin), never negative, each part bounded, nothing without edge or
// origin.
func TestSplitTTFB(t *testing.T) {
	huge := maxServerTiming
	for _, tc := range []struct {
		name string
		ttfb time.Duration
		pop  *PoPTiming
		want requestSplit
		ok   bool
	}{
		{"no entries", 300 * ms, nil, requestSplit{}, false},
		{"only rtt and client", 300 * ms, &PoPTiming{RTT: 20 * ms, HasRTT: true, ClientTLS: TLSNew}, requestSplit{}, false},
		{"reused upstream", 320 * ms, &PoPTiming{Edge: 5 * ms, HasEdge: true, Origin: 251 * ms, HasOrigin: true},
			requestSplit{LastMile: 64 * ms, Edge: 5 * ms, Origin: 251 * ms}, true},
		{"new upstream: dial and TLS are their own part", 820 * ms,
			&PoPTiming{Edge: 5 * ms, HasEdge: true, Origin: 251 * ms, HasOrigin: true, OriginDial: 1 * ms, OriginTLS: 500 * ms, OriginConn: ConnNew},
			requestSplit{LastMile: 63 * ms, Edge: 5 * ms, OriginConnect: 501 * ms, Origin: 251 * ms}, true},
		{"answered by the PoP: no origin", 30 * ms, &PoPTiming{Edge: 2 * ms, HasEdge: true},
			requestSplit{LastMile: 28 * ms, Edge: 2 * ms}, true},
		{"origin without edge", 30 * ms, &PoPTiming{Origin: 10 * ms, HasOrigin: true},
			requestSplit{LastMile: 20 * ms, Origin: 10 * ms}, true},
		{"PoP reports more than the TTFB", 100 * ms, &PoPTiming{Edge: 50 * ms, HasEdge: true, Origin: 80 * ms, HasOrigin: true},
			requestSplit{Edge: 50 * ms, Origin: 80 * ms, Overrun: true}, true},
		{"every part at the bound", 10 * ms, &PoPTiming{Edge: huge, HasEdge: true, Origin: huge, HasOrigin: true, OriginDial: huge, OriginTLS: huge},
			requestSplit{Edge: huge, OriginConnect: 2 * huge, Origin: huge, Overrun: true}, true},
		{"negative and past the bound (not from the parser)", 10 * ms,
			&PoPTiming{Edge: -5 * ms, HasEdge: true, Origin: math.MaxInt64, HasOrigin: true, OriginDial: math.MinInt64},
			requestSplit{Origin: huge, Overrun: true}, true},
		{"negative TTFB", -time.Second, &PoPTiming{Edge: 1 * ms, HasEdge: true}, requestSplit{Edge: 1 * ms, Overrun: true}, true},
		{"zero everywhere", 0, &PoPTiming{HasEdge: true, HasOrigin: true}, requestSplit{}, true},
	} {
		got, ok := splitTTFB(tc.ttfb, tc.pop)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: splitTTFB(%v, %+v) = %+v, %v; want %+v, %v", tc.name, tc.ttfb, tc.pop, got, ok, tc.want, tc.ok)
		}
		for _, d := range []time.Duration{got.LastMile, got.Edge, got.OriginConnect, got.Origin} {
			if d < 0 {
				t.Errorf("%s: a negative part in %+v", tc.name, got)
			}
		}
		if ok && !got.Overrun && got.LastMile+got.Edge+got.OriginConnect+got.Origin != tc.ttfb {
			t.Errorf("%s: parts %+v do not add up to the TTFB %v", tc.name, got, tc.ttfb)
		}
	}
}

// The PoP's entries read from a header: last of a repeated name wins (the
// entry nearest the client), hostile durs are absent, unknown descs are
// "other", and nothing is kept for a header without them.
func TestServerTimingSamplePoP(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want *PoPTiming
	}{
		{"none", []string{`db;dur=3, cache;desc=hit`}, nil},
		{"the handler's entries", []string{`edge;dur=1.250, origin;dur=251.000, origin-conn;desc=new, origin-dial;dur=0.200, origin-tls;dur=500.5, client;desc="h3 tls=0rtt", rtt;dur=20.125, throttle;dur=0.010`},
			&PoPTiming{Edge: 1250 * time.Microsecond, HasEdge: true, Origin: 251 * ms, HasOrigin: true, OriginConn: ConnNew,
				OriginDial: 200 * time.Microsecond, OriginTLS: 500500 * time.Microsecond, ClientProto: "h3", ClientTLS: TLS0RTT,
				RTT: 20125 * time.Microsecond, HasRTT: true}},
		// An origin behind another PoP sends its own entries; this PoP's
		// come after them.
		{"repeated: the last wins", []string{`edge;dur=90, origin;dur=80, origin-conn;desc=new, client;desc="h1 tls=none"`, `edge;dur=2, origin;dur=3, origin-conn;desc=reused, client;desc="h2 tls=resumed"`},
			&PoPTiming{Edge: 2 * ms, HasEdge: true, Origin: 3 * ms, HasOrigin: true, OriginConn: ConnReused, ClientProto: "h2", ClientTLS: TLSResumed}},
		{"case and token descs", []string{`EDGE;DUR=1, Origin-Conn;Desc=REUSED, Client;desc="TLS=New H2"`},
			&PoPTiming{Edge: 1 * ms, HasEdge: true, OriginConn: ConnReused, ClientProto: "h2", ClientTLS: TLSNew}},
		{"hostile", []string{`edge;dur=-1, origin;dur=NaN, rtt;dur=1e20, origin-conn;desc="warm\"ish", client;desc="h9 tls=maybe"`},
			&PoPTiming{OriginConn: DescOther, ClientProto: DescOther, ClientTLS: DescOther}},
		{"a valid dur then an invalid one: the last entry counts, absent", []string{`edge;dur=5, edge;dur=oops`}, &PoPTiming{}},
		{"desc with more words", []string{`client;desc="h2 tls=new alpn=h2"`}, &PoPTiming{ClientProto: "h2", ClientTLS: TLSNew}},
	} {
		_, got := serverTimingSample(tc.in)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("%s: %q\n got %+v\nwant %+v", tc.name, tc.in, got, tc.want)
		}
	}
}

// popHandler answers like a PoP running server_timing: its entries, with
// the client's TLS mode from the request's TLS state (0-RTT: a request read
// before the handshake completed; server_timing also asks quic-go whether
// the connection accepted 0-RTT, which a handler here cannot, so on
// loopback some 0-RTT requests read as resumed). lie, when set, replaces
// the mode.
func popHandler(entries string, lie string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mode := TLSNone
		switch {
		case r.TLS == nil:
		case !r.TLS.HandshakeComplete:
			mode = TLS0RTT
		case r.TLS.DidResume:
			mode = TLSResumed
		default:
			mode = TLSNew
		}
		if lie != "" {
			mode = lie
		}
		w.Header().Set("Server-Timing", fmt.Sprintf(`%s, client;desc="h%d tls=%s"`, entries, r.ProtoMajor, mode))
		w.Write([]byte("hello"))
	})
}

// within says got is d within the histograms' precision.
func within(got, want time.Duration) bool {
	return math.Abs(float64(got-want)) <= float64(want)*HistogramPrecision+1
}

// A run's outcomes carry the split of their responses: the PoP's parts as
// sent, the last mile as the rest, the connection counts, and the TLS mode
// the PoP saw, cross-checked with the client's.
func TestSplitOfARun(t *testing.T) {
	srv := startTestServer(t, popHandler(`edge;dur=0.05, origin;dur=0.1, origin-conn;desc=reused, rtt;dur=0.025`, ""))
	for _, tc := range []struct {
		proto   Proto
		class   Class
		outcome string
		mode    string
	}{
		{H2, "", OutcomeAll, TLSNew},
		{H2, ClassResumed, string(ClassResumed), TLSResumed},
		{H3, ClassNew, string(ClassNew), TLSNew},
	} {
		cfg := Config{URL: srv.urlFor(tc.proto), Proto: tc.proto, Requests: 6, Insecure: true, Cold: true}
		if tc.class != "" {
			cfg.Mix = Mix{{tc.class, 1}}
		}
		res, err := Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		o := res.Outcomes[tc.outcome]
		if o == nil || o.Split == nil {
			t.Fatalf("%s: no split in outcomes %v", cfg.Label(), res.Outcomes)
		}
		s := o.Split
		if s.Responses != 6 || s.NoServerTiming != 0 || s.OriginReused != 6 || s.OriginNew != 0 || s.RTTCount != 6 || s.Overrun != 0 {
			t.Errorf("%s: split counts %+v, want 6 responses, 6 reused, 6 rtt", cfg.Label(), s)
		}
		if !within(s.Edge.P50, 50*time.Microsecond) || !within(s.Origin.P50, 100*time.Microsecond) || !within(s.RTT.P50, 25*time.Microsecond) || s.OriginConnect.P50 != 0 {
			t.Errorf("%s: edge %v origin %v connect %v rtt %v, want 0.05ms 0.1ms 0 0.025ms", cfg.Label(), s.Edge.P50, s.Origin.P50, s.OriginConnect.P50, s.RTT.P50)
		}
		for _, smp := range res.Samples {
			if smp.TLSMode != tc.mode || smp.PoP == nil || smp.PoP.ClientTLS != tc.mode {
				t.Errorf("%s: sample TLS mode %q, PoP's %+v; want %s", cfg.Label(), smp.TLSMode, smp.PoP, tc.mode)
			}
			if split, _ := splitTTFB(smp.TTFB, smp.PoP); split.LastMile != smp.TTFB-150*time.Microsecond {
				t.Errorf("%s: last mile %v of TTFB %v, want TTFB - 0.15ms (a fresh TLS connection takes longer)", cfg.Label(), split.LastMile, smp.TTFB)
			}
		}
		if s.PoPTLS[tc.mode] != 6 || len(s.PoPTLS) != 1 || s.TLSDisagree != 0 || s.ProtoDisagree != 0 {
			t.Errorf("%s: PoP TLS %v, %d disagree (proto %d); want %s 6, none", cfg.Label(), s.PoPTLS, s.TLSDisagree, s.ProtoDisagree, tc.mode)
		}
		// The last mile is what the client waited beyond the PoP's 0.15 ms.
		if lm := s.LastMile.P50; lm <= 0 || lm > s.TTFB.P50 {
			t.Errorf("%s: last mile p50 %v, TTFB p50 %v", cfg.Label(), lm, s.TTFB.P50)
		}
	}
}

// A PoP that says resumed where the client did a full handshake, or
// reports more than the client waited, is shown as such; a target without
// the entries has no split.
func TestSplitDisagreementAndNoServerTiming(t *testing.T) {
	lying := startTestServer(t, popHandler(`edge;dur=100000, origin;dur=5`, TLSResumed))
	res, err := Run(t.Context(), Config{URL: lying.URL, Proto: H2, Requests: 4, Insecure: true, Cold: true})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Outcomes[OutcomeAll].Split
	if s.TLSDisagree != 4 || s.Overrun != 4 || s.LastMile.P99 != 0 {
		t.Errorf("lying PoP: %d TLS disagreements, %d overruns, last mile p99 %v; want 4, 4, 0", s.TLSDisagree, s.Overrun, s.LastMile.P99)
	}
	plain := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server-Timing", "db;dur=3")
	}))
	res2, err := Run(t.Context(), Config{URL: plain.URL, Proto: H2, Requests: 3, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if s := res2.Outcomes[OutcomeAll].Split; s == nil || s.Responses != 0 || s.NoServerTiming != 3 {
		t.Errorf("no PoP entries: split %+v, want 0 responses, 3 without", s)
	}
	var table bytes.Buffer
	WriteTable(&table, res, res2)
	out := table.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^split n +4 +no Server-Timing`),
		regexp.MustCompile(`(?m)^split last mile p50 +0\.000 +-`),
		regexp.MustCompile(`(?m)^split pop p50 +100000\.000 +-`),
		regexp.MustCompile(`(?m)^split pop > ttfb +4 +-`),
		regexp.MustCompile(`(?m)^split pop tls +resumed 4 \(client disagrees: 4\) +-`),
	} {
		if !want.MatchString(out) {
			t.Errorf("table lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "rtt") {
		t.Errorf("no response carried rtt, yet the table has a row for it:\n%s", out)
	}
}

// The table shows each outcome's split side by side, -json carries it
// under stable names, and a target with no entries says so.
func TestSplitTableAndJSON(t *testing.T) {
	split := &SplitStats{
		Responses: 5, TTFB: Stats{P50: 320 * ms}, LastMile: Stats{P50: 64 * ms}, Edge: Stats{P50: 5 * ms},
		OriginConnect: Stats{P50: 501 * ms}, Origin: Stats{P50: 251 * ms}, OriginReused: 3, OriginNew: 2,
		RTT: Stats{P50: 20 * ms}, RTTCount: 5, PoPTLS: map[string]int{TLSNew: 5},
	}
	a := &Result{Config: Config{URL: "https://pop/", Proto: H2, Mix: Mix{{ClassNew, 1}}},
		Outcomes: map[string]*OutcomeStats{"new": {Asked: ClassNew, Count: 5, Split: split}}}
	b := &Result{Config: Config{URL: "https://origin/", Proto: H3, Mix: Mix{{ClassNew, 1}}},
		Outcomes: map[string]*OutcomeStats{"new": {Asked: ClassNew, Count: 5, Split: &SplitStats{Responses: 5, OriginReused: 5, PoPTLS: map[string]int{TLSNew: 5}}}}}
	var table bytes.Buffer
	WriteTable(&table, a, b)
	for _, want := range []string{
		"split new n",
		"split new ttfb p50", "320.000",
		"split new last mile p50", "64.000",
		"split new pop p50", "5.000",
		"split new origin connect p50", "501.000",
		"split new origin p50", "251.000",
		"split new origin-conn", "reused 3 new 2",
		"split new pop rtt p50", "20.000",
		"split new pop tls", "new 5",
	} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	// A target whose PoP reports no rtt reads "-", not 0.
	if !regexp.MustCompile(`(?m)^split new pop rtt p50 +20\.000 +-$`).MatchString(table.String()) {
		t.Errorf("rtt row:\n%s", table.String())
	}
	raw, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Outcomes map[string]struct {
			Split map[string]json.RawMessage
		}
	}
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	got := back.Outcomes["new"].Split
	for _, field := range []string{"Responses", "NoServerTiming", "TTFB", "LastMile", "Edge", "OriginConnect", "Origin",
		"Overrun", "OriginReused", "OriginNew", "OriginDial", "OriginTLS", "RTT", "RTTCount", "PoPTLS", "TLSDisagree", "ProtoDisagree"} {
		if _, ok := got[field]; !ok {
			t.Errorf("-json split lacks %s: %s", field, raw)
		}
	}
	if string(got["LastMile"]) != `{"P50":64000000,"P90":0,"P99":0}` {
		t.Errorf("LastMile in -json: %s", got["LastMile"])
	}
}

// The report draws a stacked bar per target and outcome: parts in order,
// never negative, never past the plot whatever the numbers, and "no
// Server-Timing" for a target without.
func TestSplitReport(t *testing.T) {
	huge := maxServerTiming
	targets := []ReportTarget{
		{Name: "PoP", Outcomes: map[string]*OutcomeStats{
			"new":     {Asked: ClassNew, Split: &SplitStats{Responses: 5, TTFB: Stats{P50: 320 * ms}, LastMile: Stats{P50: 64 * ms}, Edge: Stats{P50: 5 * ms}, Origin: Stats{P50: 251 * ms}, OriginReused: 5, PoPTLS: map[string]int{TLSNew: 5}}},
			"resumed": {Asked: ClassResumed, Split: &SplitStats{Responses: 5, TTFB: Stats{P50: 10 * ms}, Edge: Stats{P50: -3 * ms}, Origin: Stats{P50: huge}, OriginConnect: Stats{P50: math.MinInt64}, Overrun: 5, PoPTLS: map[string]int{TLSNew: 5}, TLSDisagree: 5}},
		}},
		{Name: "direct", Outcomes: map[string]*OutcomeStats{"new": {Asked: ClassNew, Split: &SplitStats{NoServerTiming: 5}}}},
	}
	chart, rows := splitSection(targets)
	if chart == nil || len(chart.Bars) != 3 || len(rows) != 3 {
		t.Fatalf("split section %+v, %d rows; want 3 bars and rows", chart, len(rows))
	}
	right := chart.PlotX + chart.PlotW
	for _, bar := range chart.Bars {
		at := chart.PlotX
		for _, seg := range bar.Segments {
			if seg.W <= 0 || seg.X < at-1e-9 || seg.X+seg.W > right+1e-9 || math.IsNaN(seg.X) || math.IsNaN(seg.W) {
				t.Errorf("%s: segment %+v out of [%v, %v] or overlapping", bar.Label, seg, at, right)
			}
			at = seg.X + seg.W
		}
		if bar.Empty == "" && (bar.TTFBX < chart.PlotX || bar.TTFBX > right) {
			t.Errorf("%s: TTFB tick at %v, outside the plot", bar.Label, bar.TTFBX)
		}
	}
	if got := chart.Bars[2]; got.Empty != "no Server-Timing" || len(got.Segments) != 0 {
		t.Errorf("direct: bar %+v, want no Server-Timing", got)
	}
	if parts := chart.Bars[0].Segments; len(parts) != 3 || parts[0].Color != splitParts[0].color || parts[2].Color != splitParts[3].color {
		t.Errorf("PoP new: segments %+v, want last mile, PoP and origin", parts)
	}
	if !rows[1].Disagree || !strings.Contains(rows[1].LastMile, "5 with PoP > TTFB") {
		t.Errorf("resumed row %+v: want the disagreement and the overrun shown", rows[1])
	}
	var page bytes.Buffer
	if err := (&Report{Title: "split", Targets: targets}).WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	for _, want := range []string{`aria-label="TTFB split"`, "no Server-Timing", ">251.000<", "client disagrees: 5", `class="l wrap mismatch">new 5 (client disagrees: 5)`} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(html, "NaN") || regexp.MustCompile(`width="-`).MatchString(html) {
		t.Errorf("page draws a NaN or negative width")
	}
	// No split anywhere: no section.
	if c, r := splitSection(targets[1:]); c != nil || r != nil {
		t.Errorf("targets without Server-Timing got a split section")
	}
}
