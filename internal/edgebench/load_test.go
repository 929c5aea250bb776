package edgebench

import (
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Open loop: a server that stalls some responses does not slow the sender
// down. Every scheduled request reaches the server on schedule, and the
// stalls show up in the latency percentiles instead of disappearing.
func TestLoadOpenLoop(t *testing.T) {
	const (
		rate     = 50
		duration = time.Second
		stall    = 600 * time.Millisecond
	)
	var (
		mu       sync.Mutex
		arrivals []time.Time
		count    atomic.Int64
	)
	// Cleartext HTTP/1.1: each stalled request holds a connection of its
	// own, so the client must open new ones on schedule; TLS handshakes for
	// them would make a CPU-starved machine (go test -race ./... on 2 cores)
	// the limit instead of the scheduler under test.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		w.Header().Set("Server-Timing", "app;dur=1.5")
		if count.Add(1)%4 == 0 { // every 4th, the warm-up being the 1st
			time.Sleep(stall)
		}
	}))
	t.Cleanup(srv.Close)
	var progress bytes.Buffer
	res, err := Load(t.Context(), LoadConfig{
		Config: Config{URL: srv.URL, Proto: H1, Timeout: 5 * time.Second},
		Rate:   rate, Duration: duration, Progress: &syncWriter{w: &progress},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Scheduled != rate || res.Sent != rate || res.Completed != rate || res.Errors != 0 || res.Warmup != 1 {
		t.Fatalf("scheduled %d sent %d completed %d errors %d warmup %d, want %d/%d/%d/0/1",
			res.Scheduled, res.Sent, res.Completed, res.Errors, res.Warmup, rate, rate, rate)
	}
	mu.Lock()
	measured := arrivals[1:] // after the warm-up
	mu.Unlock()
	// On schedule the last request arrives (rate-1)/rate s after the first.
	// A closed loop would wait for 12 stalls of 600ms first.
	if spread := measured[len(measured)-1].Sub(measured[0]); spread > duration+stall/2 {
		t.Errorf("the %d requests reached the server over %v, want about %v: the stalls held the sender back", len(measured), spread, duration)
	}
	if res.Latency.P99 < stall || res.Latency.P50 >= stall {
		t.Errorf("latency %+v: want p99 >= the %v stall and p50 below it", res.Latency, stall)
	}
	if res.SendRate < rate*0.8 {
		t.Errorf("send rate %.1f/s, want about %d/s", res.SendRate, rate)
	}
	if app := res.ServerTiming["app"]; app.Count != rate || app.P50 != 1500*time.Microsecond {
		t.Errorf("server timing app %+v, want %d responses of 1.5ms", app, rate)
	}
	if res.Statuses[200] != rate {
		t.Errorf("statuses %v, want %d x 200", res.Statuses, rate)
	}
	if !strings.Contains(progress.String(), "sent ") {
		t.Errorf("no progress line in a run longer than a second: %q", progress.String())
	}
}

// Failed requests are counted by kind, and a cold run needs no warm-up.
func TestLoadErrorKinds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := "https://" + ln.Addr().String()
	ln.Close()
	stalled := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	var results []*LoadResult
	for _, tc := range []struct {
		url, kind string
	}{
		{closedPort, "refused"},
		{stalled.URL, "timeout"},
	} {
		res, err := Load(t.Context(), LoadConfig{
			Config: Config{URL: tc.url, Proto: H2, Cold: true, Insecure: true, Timeout: 200 * time.Millisecond},
			Rate:   20, Duration: 250 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Sent != 5 || res.Errors != 5 || res.ErrorKinds[tc.kind] != 5 || res.ErrorExamples[tc.kind] == "" {
			t.Errorf("%s: sent %d, errors %d by kind %v (%v), want 5 %s", tc.url, res.Sent, res.Errors, res.ErrorKinds, res.ErrorExamples, tc.kind)
		}
		results = append(results, res)
	}
	// A handshake the server refuses (it offers no h2) is a tls error.
	h1only := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	h1only.Config.ErrorLog = log.New(io.Discard, "", 0)
	h1only.StartTLS()
	t.Cleanup(h1only.Close)
	refused, err := Load(t.Context(), LoadConfig{Config: Config{URL: h1only.URL, Proto: H2, Cold: true, Insecure: true}, Rate: 20, Duration: 100 * time.Millisecond})
	if err != nil || refused.ErrorKinds["tls"] != 2 {
		t.Errorf("h2 against an HTTP/1.1-only server: %v, errors %v (%v), want 2 tls", err, refused.ErrorKinds, refused.ErrorExamples)
	}

	var table bytes.Buffer
	WriteLoadTable(&table, results...)
	for _, row := range []string{
		`(?m)^A  h2 cold  ` + regexp.QuoteMeta(closedPort) + `  20/s for 250ms, open loop$`,
		`(?m)^ms / count\s+A\s+B\s+B/A$`,
		`(?m)^sent\s+5\s+5$`,
		`(?m)^errors\s+5 \(refused 5\)\s+5 \(timeout 5\)$`,
		`(?m)^A refused error, first: .*connection refused`,
		`(?m)^B timeout error, first: `,
	} {
		if !regexp.MustCompile(row).MatchString(table.String()) {
			t.Errorf("load table has no line matching %s:\n%s", row, table.String())
		}
	}
}

// syncWriter lets the test read what the progress goroutine wrote.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// A server that names a new Server-Timing metric in every response cannot
// grow a load run's memory: past maxTimingNames names, metrics are counted
// under "(other)", and every duration is still counted once.
func TestLoadServerTimingNamesBounded(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server-Timing", "m"+strconv.FormatInt(n.Add(1), 10)+";dur=2")
	}))
	t.Cleanup(srv.Close)
	res, err := Load(t.Context(), LoadConfig{Config: Config{URL: srv.URL, Proto: H1, Timeout: 5 * time.Second}, Rate: 200, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ServerTiming) != maxTimingNames+1 {
		t.Errorf("%d metric names kept, want %d and %q", len(res.ServerTiming), maxTimingNames, timingOther)
	}
	total := 0
	for _, ts := range res.ServerTiming {
		total += ts.Count
	}
	if total != res.Completed || res.ServerTiming[timingOther].P50 != 2*time.Millisecond {
		t.Errorf("%d durations counted for %d responses; other %+v", total, res.Completed, res.ServerTiming[timingOther])
	}
}

// A server sending a new :status in every response (h2 and h3 clients
// accept any integer) cannot grow a load run's Statuses map: codes outside
// 100..999 are counted under StatusMalformed, and every response once.
func TestLoadStatusesBounded(t *testing.T) {
	res := &LoadResult{}
	agg := &loadAggregate{timings: timingHistograms{}, res: res}
	for range loadShards {
		agg.classes = append(agg.classes, newClassAggregate(time.Now()))
	}
	const n = 5000
	for i := range n {
		agg.started()
		agg.add(Sample{Status: 1000 + i})
	}
	agg.started()
	agg.add(Sample{Status: 200})
	agg.summarize()
	if len(res.Statuses) != 2 || res.Statuses[StatusMalformed] != n || res.Statuses[200] != 1 || res.Completed != n+1 {
		t.Errorf("%d status keys (%d malformed, %d x 200) for %d responses; want 2 keys: %d malformed, 1 x 200", len(res.Statuses), res.Statuses[StatusMalformed], res.Statuses[200], res.Completed, n)
	}
}

// A server whose every response repeats one Server-Timing name 10,000 times
// with the largest accepted dur gets each response counted at the bound of a
// single dur, not at a wrapped (negative, then recorded as 0) sum.
func TestLoadServerTimingSaturates(t *testing.T) {
	header := repeatedServerTiming("a", 10_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server-Timing", header)
	}))
	t.Cleanup(srv.Close)
	res, err := Load(t.Context(), LoadConfig{Config: Config{URL: srv.URL, Proto: H1, Timeout: 5 * time.Second}, Rate: 20, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := res.ServerTiming["a"]
	if res.Completed == 0 || a.Count != res.Completed {
		t.Fatalf("%d of %d responses counted: %+v", a.Count, res.Completed, a)
	}
	lo := time.Duration(float64(maxServerTiming) * (1 - HistogramPrecision))
	for _, d := range []time.Duration{a.P50, a.P90, a.P99, a.Mean} {
		if d < lo || d > maxServerTiming {
			t.Errorf("server-timing a %+v, want every figure within %v of %v", a, HistogramPrecision, maxServerTiming)
			break
		}
	}
}
