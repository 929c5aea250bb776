package edgebench

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

var spokenName = map[Proto]string{H1: "HTTP/1.1", H2: "HTTP/2.0", H3: "HTTP/3.0"}

// Cold requests each open (and pay for) their own connection; warm ones all
// reuse the connection the warm-up request opened.
func TestRunColdAndWarm(t *testing.T) {
	srv := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Proto", r.Proto)
		w.Write([]byte("hello"))
	}))
	for _, proto := range []Proto{H1, H2, H3} {
		t.Run(string(proto), func(t *testing.T) {
			const n = 4
			before := srv.conns(proto)
			cold, err := Run(t.Context(), Config{URL: srv.urlFor(proto), Proto: proto, Cold: true, Requests: n, Insecure: true, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if got := srv.conns(proto) - before; got != n {
				t.Errorf("cold run opened %d connections, want %d (one per request)", got, n)
			}
			if cold.Warmup != 0 || len(cold.Samples) != n || cold.Errors != 0 {
				t.Fatalf("cold: warmup %d, %d samples, %d errors; want 0, %d, 0", cold.Warmup, len(cold.Samples), cold.Errors, n)
			}
			for i, s := range cold.Samples {
				if s.Proto != spokenName[proto] || s.Status != 200 || s.BodyBytes != 5 {
					t.Errorf("cold sample %d: %s %d %d bytes, want %s 200 5 bytes", i, s.Proto, s.Status, s.BodyBytes, spokenName[proto])
				}
				if s.Reused || s.Connect <= 0 || s.TLS <= 0 {
					t.Errorf("cold sample %d: reused %v, connect %v, tls %v: want a new connection with both phases > 0", i, s.Reused, s.Connect, s.TLS)
				}
				if s.TTFB < s.Connect+s.TLS || s.Total < s.TTFB {
					t.Errorf("cold sample %d: ttfb %v total %v: want connect+tls (%v) <= ttfb <= total", i, s.TTFB, s.Total, s.Connect+s.TLS)
				}
			}
			if cold.Handshake.P50 < cold.TLS.P50 {
				t.Errorf("cold: handshake p50 %v below tls p50 %v", cold.Handshake.P50, cold.TLS.P50)
			}

			before = srv.conns(proto)
			warm, err := Run(t.Context(), Config{URL: srv.urlFor(proto), Proto: proto, Requests: n, Insecure: true, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if got := srv.conns(proto) - before; got != 1 {
				t.Errorf("warm run opened %d connections, want 1 (the warm-up's)", got)
			}
			if warm.Warmup != 1 || len(warm.Samples) != n {
				t.Fatalf("warm: warmup %d, %d samples; want 1, %d", warm.Warmup, len(warm.Samples), n)
			}
			for i, s := range warm.Samples {
				if s.Err != nil || s.Proto != spokenName[proto] {
					t.Errorf("warm sample %d: %s, %v", i, s.Proto, s.Err)
				}
				if !s.Reused || s.Connect != 0 || s.TLS != 0 {
					t.Errorf("warm sample %d: reused %v, connect %v, tls %v: want the reused connection, phases 0", i, s.Reused, s.Connect, s.TLS)
				}
			}
			if warm.Handshake != (Stats{}) || warm.TTFB.P50 <= 0 {
				t.Errorf("warm: handshake %+v ttfb %+v: want zero handshake and a positive ttfb", warm.Handshake, warm.TTFB)
			}
		})
	}
}

// h2 against a server that only offers HTTP/1.1 is an error, not a silent
// downgrade, so a comparison never labels HTTP/1.1 figures as h2.
func TestRunH2RefusesDowngrade(t *testing.T) {
	h1only := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	h1only.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	h1only.StartTLS()
	t.Cleanup(h1only.Close)
	res, err := Run(t.Context(), Config{URL: h1only.URL, Proto: H2, Cold: true, Requests: 1, Insecure: true, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 1 {
		t.Errorf("h2 against an HTTP/1.1-only server: %d errors, samples %+v; want the request to fail", res.Errors, res.Samples)
	}
	if _, err := Run(t.Context(), Config{URL: h1only.URL, Proto: H2, Requests: 1, Insecure: true, Timeout: 2 * time.Second}); err == nil || !strings.Contains(err.Error(), "warm-up request") {
		t.Errorf("warm h2 against an HTTP/1.1-only server: %v, want the warm-up to fail", err)
	}
}

// The body is counted as it arrives: compressed when the caller asked for
// compression, and never silently asked for by the transport.
func TestBodyBytesOnTheWire(t *testing.T) {
	plain := strings.Repeat("edge ", 2000)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(plain))
	zw.Close()
	srv := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gz.Bytes())
			return
		}
		w.Write([]byte(plain))
	}))
	for _, proto := range []Proto{H1, H2, H3} {
		raw, err := Run(t.Context(), Config{URL: srv.urlFor(proto), Proto: proto, Requests: 2, Insecure: true})
		if err != nil {
			t.Fatal(err)
		}
		if raw.BodyBytes != int64(len(plain)) {
			t.Errorf("%s without Accept-Encoding: %d body bytes, want %d", proto, raw.BodyBytes, len(plain))
		}
		compressed, err := Run(t.Context(), Config{URL: srv.urlFor(proto), Proto: proto, Requests: 2, Insecure: true,
			Header: http.Header{"Accept-Encoding": {"gzip"}}})
		if err != nil {
			t.Fatal(err)
		}
		if compressed.BodyBytes != int64(gz.Len()) {
			t.Errorf("%s with Accept-Encoding gzip: %d body bytes, want the %d compressed bytes", proto, compressed.BodyBytes, gz.Len())
		}
	}
}

// LocalAddr is the source address the server sees, over TCP and UDP alike.
func TestLocalAddr(t *testing.T) {
	srv := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, proto := range []Proto{H1, H2, H3} {
		seen := len(srv.remoteAddrs())
		if _, err := Run(t.Context(), Config{URL: srv.urlFor(proto), Proto: proto, Cold: true, Requests: 2, Insecure: true, LocalAddr: "127.0.0.2"}); err != nil {
			t.Fatal(err)
		}
		remotes := srv.remoteAddrs()[seen:]
		if len(remotes) != 2 {
			t.Fatalf("%s: server saw %d requests, want 2", proto, len(remotes))
		}
		for _, addr := range remotes {
			if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.2" {
				t.Errorf("%s: server saw the request from %s, want 127.0.0.2", proto, addr)
			}
		}
	}
}

// The server's Server-Timing reaches each sample (summed per name) and the
// result (aggregated per name over the responses).
func TestServerTimingAggregated(t *testing.T) {
	srv := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Server-Timing", `db;dur=12.5, cache;desc="hit, fresh";dur=0.5`)
		w.Header().Add("Server-Timing", `db;dur=2.5, total`)
	}))
	reported := 0
	res, err := Run(t.Context(), Config{URL: srv.URL, Proto: H2, Requests: 3, Insecure: true, OnSample: func(Sample) { reported++ }})
	if err != nil {
		t.Fatal(err)
	}
	if reported != 3 {
		t.Errorf("OnSample saw %d samples, want the 3 measured (not the warm-up)", reported)
	}
	want := map[string]time.Duration{"db": 15 * time.Millisecond, "cache": 500 * time.Microsecond}
	for i, s := range res.Samples {
		if len(s.ServerTiming) != len(want) || s.ServerTiming["db"] != want["db"] || s.ServerTiming["cache"] != want["cache"] {
			t.Errorf("sample %d server timing %v, want %v", i, s.ServerTiming, want)
		}
	}
	db := res.ServerTiming["db"]
	if db.Count != 3 || db.Mean != 15*time.Millisecond || db.P99 != 15*time.Millisecond {
		t.Errorf("result db timing %+v, want 3 responses of 15ms", db)
	}
	if _, ok := res.ServerTiming["total"]; ok {
		t.Errorf("a metric without dur was aggregated: %v", res.ServerTiming)
	}
}

func TestConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{URL: "https://x/", Proto: "h4"}, `protocol "h4": must be h1, h2 or h3`},
		{Config{URL: "http://x/", Proto: H3}, "h3 needs an https:// URL"},
		{Config{URL: "ftp://x/"}, "must be http://host/... or https://host/..."},
		{Config{URL: "localhost:8080"}, "must be http://host/... or https://host/..."},
		{Config{URL: "https://x/", Requests: -1}, "requests -1: must be at least 1"},
		{Config{URL: "https://x/", Timeout: -time.Second}, "timeout -1s: must be positive"},
		{Config{URL: "https://x/", LocalAddr: "eth0"}, `local address "eth0": must be an IP address`},
	} {
		_, err := Run(context.Background(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
	for _, tc := range []struct {
		cfg  LoadConfig
		want string
	}{
		{LoadConfig{Config: Config{URL: "https://x/"}, Duration: time.Second}, "rate 0: must be a positive number"},
		{LoadConfig{Config: Config{URL: "https://x/"}, Rate: 10}, "duration 0s: must be positive"},
		{LoadConfig{Config: Config{URL: "https://x/"}, Rate: 1, Duration: 500 * time.Millisecond}, "schedules no request"},
	} {
		_, err := Load(context.Background(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := ParseProtos("h1,h2,http3"); err == nil || !strings.Contains(err.Error(), `"http3"`) {
		t.Errorf("ParseProtos(h1,h2,http3) = %v, want an error naming http3", err)
	}
}

func TestPercentiles(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		d = append(d, time.Duration(i))
	}
	if got := percentiles(d); got != (Stats{50, 90, 99}) {
		t.Errorf("percentiles(1..100) = %+v, want 50/90/99", got)
	}
	if got := percentiles(d[90:]); got != (Stats{5, 9, 10}) { // 10..1
		t.Errorf("percentiles(1..10) = %+v, want 5/9/10 (nearest rank)", got)
	}
	if got := percentiles([]time.Duration{7}); got != (Stats{7, 7, 7}) {
		t.Errorf("percentiles(7) = %+v", got)
	}
	if got := percentiles(nil); got != (Stats{}) {
		t.Errorf("percentiles(nil) = %+v", got)
	}
}

// A Server-Timing trailer (what a PoP knows only at the end of the body)
// is summed into the sample's per-name durs over h1, h2 and h3; the split
// reads the header only, so an edge entry in the trailer does not move it.
func TestServerTimingTrailer(t *testing.T) {
	srv := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "Server-Timing")
		// As edgekit's server_timing sends it: quic-go's HTTP/3 leaves a
		// field declared in Trailer out of the header block, so the
		// header's entries go under the lowercase name.
		w.Header()["server-timing"] = []string{"edge;dur=2, app;dur=1"}
		w.Write([]byte("body"))
		http.NewResponseController(w).Flush() // streamed: no Content-Length
		w.Header().Set("Server-Timing", "total;dur=7, app;dur=3, edge;dur=50")
	}))
	for _, proto := range []Proto{H1, H2, H3} {
		t.Run(string(proto), func(t *testing.T) {
			res, err := Run(t.Context(), Config{URL: srv.urlFor(proto), Proto: proto, Requests: 2, Insecure: true})
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range res.Samples {
				if s.Err != nil {
					t.Fatalf("sample %d: %v", i, s.Err)
				}
				if got := s.ServerTiming["total"]; got != 7*time.Millisecond {
					t.Errorf("sample %d: total %v, want the trailer's 7ms (all: %v)", i, got, s.ServerTiming)
				}
				if got := s.ServerTiming["app"]; got != 4*time.Millisecond {
					t.Errorf("sample %d: app %v, want header 1ms + trailer 3ms", i, got)
				}
				if s.PoP == nil || s.PoP.Edge != 2*time.Millisecond {
					t.Errorf("sample %d: PoP %+v, want edge 2ms from the header alone", i, s.PoP)
				}
			}
			if total := res.ServerTiming["total"]; total.Count != 2 {
				t.Errorf("result total %+v, want 2 responses", total)
			}
		})
	}
}
