package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func startServer(t *testing.T, body string) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server-Timing", "origin;dur=2")
		w.Write([]byte(body))
	}))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts.URL + "/"
}

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code = run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// runJSON runs the command, which must succeed, and decodes its stdout into
// v. It returns stderr.
func runJSON(t *testing.T, v any, args ...string) string {
	t.Helper()
	code, stdout, stderr := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	return stderr
}

// Two URLs and two protocols give four targets in the JSON, in order, each
// with its samples.
func TestJSONOutputDecodes(t *testing.T) {
	a, b := startServer(t, "aaaa"), startServer(t, "bbbbbbbb")
	var out struct {
		Results []struct {
			Config struct {
				URL   string
				Proto string
				Cold  bool
			}
			Samples []struct {
				Status       int
				Proto        string
				BodyBytes    int64
				TLS, TTFB    time.Duration
				ServerTiming map[string]time.Duration
			}
			Errors    int
			BodyBytes int64
			TTFB      struct{ P50, P90, P99 time.Duration }
		}
	}
	stderr := runJSON(t, &out, "-json", "-k", "-n", "3", "-cold", "-proto", "h1,h2", a, b)
	want := []struct {
		url, proto, spoken string
		bytes              int64
	}{{a, "h1", "HTTP/1.1", 4}, {a, "h2", "HTTP/2.0", 4}, {b, "h1", "HTTP/1.1", 8}, {b, "h2", "HTTP/2.0", 8}}
	if len(out.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(out.Results), len(want))
	}
	for i, w := range want {
		r := out.Results[i]
		if r.Config.URL != w.url || r.Config.Proto != w.proto || !r.Config.Cold || len(r.Samples) != 3 || r.Errors != 0 || r.BodyBytes != w.bytes {
			t.Errorf("result %d: %+v, want %s %s cold, 3 samples of %d bytes", i, r.Config, w.url, w.proto, w.bytes)
			continue
		}
		for _, s := range r.Samples {
			if s.Status != 200 || s.Proto != w.spoken || s.TLS <= 0 || s.TTFB < s.TLS || s.ServerTiming["origin"] != 2*time.Millisecond {
				t.Errorf("result %d sample %+v", i, s)
			}
		}
		if r.TTFB.P50 <= 0 || r.TTFB.P99 < r.TTFB.P50 {
			t.Errorf("result %d ttfb %+v", i, r.TTFB)
		}
	}
	if !strings.Contains(stderr, "A: h1 cold "+a) || !strings.Contains(stderr, "D: h2 cold "+b) {
		t.Errorf("progress on stderr does not name the targets:\n%s", stderr)
	}
}

// A server naming 200,000 Server-Timing metrics in every response gets, in
// probe mode as in load mode, 64 names and "(other)" per sample and per
// result: the -json output stays small (it was 767 MB for -n 20) and every
// duration is counted once.
func TestProbeJSONServerTimingNamesBounded(t *testing.T) {
	const names, requests = 200_000, 5
	var b strings.Builder
	for i := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("m" + strconv.Itoa(i) + ";dur=1")
	}
	header := b.String()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server-Timing", header)
	}))
	t.Cleanup(ts.Close)
	code, stdout, stderr := runCmd(t, "-json", "-n", strconv.Itoa(requests), "-proto", "h1", ts.URL+"/")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if len(stdout) > 256<<10 {
		t.Fatalf("-json wrote %d bytes for %d requests, want at most 256 KiB", len(stdout), requests)
	}
	var out struct {
		Results []struct {
			Samples      []struct{ ServerTiming map[string]time.Duration }
			ServerTiming map[string]struct{ Count int }
		}
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("output is not JSON: %v", err)
	}
	if len(out.Results) != 1 || len(out.Results[0].Samples) != requests {
		t.Fatalf("want one result of %d samples: %s", requests, stdout)
	}
	r := out.Results[0]
	for i, s := range r.Samples {
		var total time.Duration
		for _, d := range s.ServerTiming {
			total += d
		}
		if len(s.ServerTiming) != 65 || s.ServerTiming["(other)"] == 0 || total != names*time.Millisecond {
			t.Errorf("sample %d: %d names summing to %v, want 64 and (other), %v in all", i, len(s.ServerTiming), total, names*time.Millisecond)
		}
	}
	if len(r.ServerTiming) != 65 || r.ServerTiming["(other)"].Count != requests {
		t.Errorf("result: %d names, (other) %+v; want 64 and (other) of %d responses", len(r.ServerTiming), r.ServerTiming["(other)"], requests)
	}
}

// The table names both targets and gives each a column of figures, with
// their ratio.
func TestTableListsBothTargets(t *testing.T) {
	a, b := startServer(t, "a"), startServer(t, "b")
	code, stdout, stderr := runCmd(t, "-k", "-n", "2", a, b)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"A  h2 warm  " + a + "  2 requests, 0 errors (1 warm-up request excluded)",
		"B  h2 warm  " + b + "  2 requests, 0 errors (1 warm-up request excluded)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	for _, row := range []string{
		`(?m)^ms / count\s+A\s+B\s+B/A$`,
		`(?m)^spoken\s+HTTP/2\.0\s+HTTP/2\.0$`,
		`(?m)^ttfb p50\s+\d+\.\d{3}\s+\d+\.\d{3}\s+(\d+\.\d\dx|-)$`,
		`(?m)^total p99\s+\d+\.\d{3}\s+\d+\.\d{3}\s+(\d+\.\d\dx|-)$`,
		`(?m)^server-timing origin p50\s+2\.000\s+2\.000\s+1\.00x$`,
	} {
		if !regexp.MustCompile(row).MatchString(stdout) {
			t.Errorf("table has no row matching %s:\n%s", row, stdout)
		}
	}
}

func TestLoadJSON(t *testing.T) {
	a := startServer(t, "a")
	var out struct {
		Load []struct {
			Config struct {
				URL      string
				Rate     float64
				Duration time.Duration
			}
			Scheduled, Sent, Completed, Errors int
			Latency                            struct{ P50, P99 time.Duration }
		}
	}
	runJSON(t, &out, "-json", "-k", "-load", "-rate", "40", "-duration", "250ms", "-proto", "h2", a)
	if len(out.Load) != 1 {
		t.Fatalf("%d load results, want 1", len(out.Load))
	}
	r := out.Load[0]
	if r.Config.URL != a || r.Config.Rate != 40 || r.Config.Duration != 250*time.Millisecond || r.Scheduled != 10 || r.Sent != 10 || r.Completed != 10 || r.Errors != 0 || r.Latency.P50 <= 0 {
		t.Errorf("load result %+v, want 10 requests sent and completed", r)
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "want one URL, or two to compare; got 0"},
		{[]string{"https://a/", "https://b/", "https://c/"}, "got 3"},
		{[]string{"-proto", "h2,quic", "https://a/"}, `-proto: protocol "quic": must be h1, h2 or h3`},
		{[]string{"-n", "0", "https://a/"}, "-n 0: must be at least 1"},
		{[]string{"-load", "-rate", "0", "https://a/"}, "-rate 0: must be a positive number"},
		{[]string{"-load", "-duration", "0s", "https://a/"}, "-duration 0s: must be positive"},
		{[]string{"-H", "no colon", "https://a/"}, `"no colon": want 'Name: value'`},
		{[]string{"-timeout", "-1s", "https://a/"}, "-timeout -1s: must be positive"},
		{[]string{"-nope", "https://a/"}, "flag provided but not defined: -nope"},
		{[]string{"-class", "0rtt", "-proto", "h2", "https://a/"}, "class 0rtt over h2: unsupported, Go's crypto/tls has no client 0-RTT (early data) over TCP; use -proto h3"},
		{[]string{"-mix", "new=1,0rtt=1", "-proto", "h3,h1", "https://a/"}, "class 0rtt over h1: unsupported"},
		{[]string{"-class", "resumed", "http://a/"}, "class resumed needs an https:// URL"},
		{[]string{"-class", "warm", "https://a/"}, "-class \"warm\": want new, resumed or 0rtt"},
		{[]string{"-class", "new=3", "https://a/"}, "-class \"new=3\": want new, resumed or 0rtt"},
		{[]string{"-mix", "new=0", "https://a/"}, "must be an integer 1..1000000"},
		{[]string{"-mix", "new", "-class", "new", "https://a/"}, "-class and -mix: give one"},
		{[]string{"-mix", "new", "-cold", "https://a/"}, "drop -cold/-warm"},
	} {
		code, _, stderr := runCmd(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("edgebench %q: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	// A config the library refuses fails with exit 1 and its message.
	code, _, stderr := runCmd(t, "-proto", "h3", "http://127.0.0.1:1/")
	if code != 1 || !strings.Contains(stderr, "h3 needs an https:// URL") {
		t.Errorf("h3 over http://: exit %d, stderr %q", code, stderr)
	}
}

// -class measures each class as its own target; -json and -html carry the
// same numbers: every outcome's p99.9 in the JSON is on the page.
func TestClassesJSONAndHTML(t *testing.T) {
	a := startServer(t, "hello")
	page := filepath.Join(t.TempDir(), "report.html")
	var out struct {
		Results []struct {
			Config   struct{ Mix []struct{ Class string } }
			Warmup   int
			Outcomes map[string]struct {
				Asked string
				Count int
				TTFB  struct{ P50, P999, Max time.Duration }
			}
		}
	}
	runJSON(t, &out, "-json", "-k", "-n", "4", "-class", "new,resumed", "-html", page, a)
	if len(out.Results) != 2 {
		t.Fatalf("%d results, want 2 (one per class)", len(out.Results))
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for i, class := range []string{"new", "resumed"} {
		r := out.Results[i]
		o, ok := r.Outcomes[class]
		if len(r.Config.Mix) != 1 || r.Config.Mix[0].Class != class || !ok || o.Count != 4 || o.Asked != class || len(r.Outcomes) != 1 {
			t.Errorf("result %d: %+v, want 4 requests of %s", i, r, class)
			continue
		}
		if o.TTFB.P50 <= 0 || o.TTFB.P999 < o.TTFB.P50 || o.TTFB.Max < o.TTFB.P999 {
			t.Errorf("%s: ttfb %+v", class, o.TTFB)
		}
		p999 := strconv.FormatFloat(float64(o.TTFB.P999)/float64(time.Millisecond), 'f', 3, 64)
		if !strings.Contains(string(html), "<td>"+p999+"</td>") {
			t.Errorf("%s: p99.9 %s ms from -json is not on the page", class, p999)
		}
	}

	// The table gets a row per outcome.
	code, stdout, stderr := runCmd(t, "-k", "-n", "2", "-mix", "new=1,resumed=1", a)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, row := range []string{`(?m)^A  h2 mix new=1,resumed=1  `, `(?m)^class new n\s+1$`, `(?m)^class resumed n\s+1$`, `(?m)^class resumed ttfb p99\.9\s+\d+\.\d{3}$`} {
		if !regexp.MustCompile(row).MatchString(stdout) {
			t.Errorf("table has no row matching %s:\n%s", row, stdout)
		}
	}
}

// A server repeating one Server-Timing name 10,000 times with the largest
// accepted dur (about 180 KB of header) gets its figure reported at the
// bound of a single dur (999,999,999 ms), never a wrapped negative sum.
func TestProbeServerTimingSumSaturates(t *testing.T) {
	header := strings.Repeat("a;dur=999999999, ", 9_999) + "a;dur=999999999"
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server-Timing", header)
	}))
	t.Cleanup(ts.Close)
	code, stdout, stderr := runCmd(t, "-q", "-proto", "h1", "-n", "3", ts.URL+"/")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows := regexp.MustCompile(`(?m)^server-timing a (p50|p90|p99)\s+(\S+)`).FindAllStringSubmatch(stdout, -1)
	if len(rows) != 3 {
		t.Fatalf("want server-timing a p50, p90 and p99 rows:\n%s", stdout)
	}
	for _, row := range rows {
		ms, err := strconv.ParseFloat(row[2], 64)
		if err != nil || ms != 1e9 {
			t.Errorf("server-timing a %s = %s, want 1000000000.000 (the bound of one dur):\n%s", row[1], row[2], stdout)
		}
	}
}

// Behind a PoP's server_timing entries, -json carries each outcome's split
// under its documented names, the table its rows and the page its bars;
// a target without the entries reads "no Server-Timing".
func TestSplitJSONTableAndHTML(t *testing.T) {
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server-Timing", `edge;dur=0.02, origin;dur=0.03, origin-conn;desc=new, origin-dial;dur=0.01, origin-tls;dur=0.01, client;desc="h2 tls=new", rtt;dur=0.005`)
		w.Write([]byte("hello"))
	}))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	plain := startServer(t, "plain") // origin;dur=2 only: no edge, but origin: a split
	bare := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("bare")) }))
	bare.EnableHTTP2 = true
	bare.StartTLS()
	t.Cleanup(bare.Close)
	page := filepath.Join(t.TempDir(), "report.html")
	var out struct {
		Results []struct {
			Outcomes map[string]struct {
				Split struct {
					Responses, NoServerTiming, OriginNew, OriginReused, RTTCount, TLSDisagree int
					Edge, Origin, OriginConnect, LastMile, TTFB                               struct{ P50 time.Duration }
					PoPTLS                                                                    map[string]int
				}
			}
		}
	}
	runJSON(t, &out, "-json", "-k", "-n", "3", "-cold", "-html", page, ts.URL+"/", bare.URL+"/")
	if len(out.Results) != 2 {
		t.Fatalf("%d results, want 2", len(out.Results))
	}
	s := out.Results[0].Outcomes["all"].Split
	near := func(got, want time.Duration) bool { return got >= want*999/1000 && got <= want*1001/1000 }
	if s.Responses != 3 || s.OriginNew != 3 || s.RTTCount != 3 || s.PoPTLS["new"] != 3 || s.TLSDisagree != 0 ||
		!near(s.Edge.P50, 20*time.Microsecond) || !near(s.Origin.P50, 30*time.Microsecond) || !near(s.OriginConnect.P50, 20*time.Microsecond) ||
		s.LastMile.P50 <= 0 || s.LastMile.P50 >= s.TTFB.P50 {
		t.Errorf("-json split %+v", s)
	}
	if s := out.Results[1].Outcomes["all"].Split; s.Responses != 0 || s.NoServerTiming != 3 {
		t.Errorf("-json split of a server without entries: %+v, want 3 without", s)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), `aria-label="TTFB split"`) || !strings.Contains(string(html), "no Server-Timing") {
		t.Errorf("the page has no split section, or no 'no Server-Timing' for B")
	}
	code, stdout, stderr := runCmd(t, "-k", "-n", "2", "-cold", plain, bare.URL+"/")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, row := range []string{`(?m)^split n\s+2\s+no Server-Timing$`, `(?m)^split origin p50\s+2\.000\s+-\s*$`, `(?m)^split origin-conn\s+reused 0 new 0\s+-\s*$`} {
		if !regexp.MustCompile(row).MatchString(stdout) {
			t.Errorf("table has no row matching %s:\n%s", row, stdout)
		}
	}
}
