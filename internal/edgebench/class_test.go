package edgebench

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// skipClient0RTTUnderRace skips a test whose client sends 0-RTT when built
// with -race: quic-go v0.63.0 writes the server's transport parameters
// from the handshake while streams opened in 0-RTT read them, without a
// lock (quic-go/quic-go#4303, open), and the race detector fails the test
// for it. .ci/run runs these tests again without -race.
func skipClient0RTTUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("client 0-RTT races inside quic-go v0.63.0 (quic-go/quic-go#4303); run without -race (.ci/run does)")
	}
}

// classRun measures n requests of one class and returns the result; the
// config must be valid.
func classRun(t *testing.T, url string, proto Proto, class Class, n int) *Result {
	t.Helper()
	res, err := Run(t.Context(), Config{URL: url, Proto: proto, Mix: Mix{{class, 1}}, Requests: n, Insecure: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 {
		t.Fatalf("%s %s: %d errors: %v", proto, class, res.Errors, res.Samples[0].Err)
	}
	return res
}

// wantOutcomes checks that every sample and the per-outcome summary say
// what happened.
func wantOutcomes(t *testing.T, res *Result, asked Class, want string) {
	t.Helper()
	for i, s := range res.Samples {
		if s.Class != asked || s.Outcome != want {
			t.Errorf("sample %d: class %q outcome %q, want %q %q", i, s.Class, s.Outcome, asked, want)
		}
	}
	if len(res.Outcomes) != 1 || res.Outcomes[want] == nil || res.Outcomes[want].Count != len(res.Samples) || res.Outcomes[want].Asked != asked {
		t.Errorf("outcomes %v, want only %q with %d requests asked as %s", res.Outcomes, want, len(res.Samples), asked)
	}
}

// new and resumed over h1, h2 and h3 against loopback servers that issue
// tickets: each request opens its own connection, and resumed ones really
// resumed (the server saw DidResume too).
func TestClassNewAndResumed(t *testing.T) {
	var serverResumed, serverFull atomic.Int64
	srv := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS.DidResume {
			serverResumed.Add(1)
		} else {
			serverFull.Add(1)
		}
		w.Write([]byte("hello"))
	}))
	const n = 3
	for _, proto := range []Proto{H1, H2, H3} {
		t.Run(string(proto), func(t *testing.T) {
			before := srv.conns(proto)
			serverResumed.Store(0)
			serverFull.Store(0)
			res := classRun(t, srv.urlFor(proto), proto, ClassNew, n)
			wantOutcomes(t, res, ClassNew, "new")
			if got := serverResumed.Load(); got != 0 {
				t.Errorf("new: the server resumed %d sessions", got)
			}
			if res.Warmup != 0 || srv.conns(proto)-before != n {
				t.Errorf("new: warmup %d, %d connections; want 0 and %d", res.Warmup, srv.conns(proto)-before, n)
			}
			if o := res.Outcomes["new"]; o.Handshake.P50 <= 0 || o.TTFB.P999 < o.TTFB.P50 || o.TTFB.Max < o.TTFB.P999 || len(o.TTFB.CDF) == 0 {
				t.Errorf("new: summary %+v: want a handshake and ordered percentiles with a CDF", o)
			}

			before = srv.conns(proto)
			serverResumed.Store(0)
			res = classRun(t, srv.urlFor(proto), proto, ClassResumed, n)
			wantOutcomes(t, res, ClassResumed, "resumed")
			// The priming request is the one full handshake.
			if got := serverResumed.Load(); got != n {
				t.Errorf("resumed: the server resumed %d of %d measured sessions", got, n)
			}
			if res.Warmup != 1 || srv.conns(proto)-before != n+1 {
				t.Errorf("resumed: warmup %d, %d connections; want 1 and %d", res.Warmup, srv.conns(proto)-before, n+1)
			}
		})
	}
}

// 0rtt over h3: the request rides in early data (the server sees it before
// its handshake completes), and the client saw Used0RTT.
func TestClass0RTT(t *testing.T) {
	skipClient0RTTUnderRace(t)
	var early, total atomic.Int64
	srv := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		total.Add(1)
		if r.TLS != nil && !r.TLS.HandshakeComplete {
			early.Add(1)
		}
		w.Write([]byte("hello"))
	}))
	const n = 3
	res := classRun(t, srv.H3URL, H3, Class0RTT, n)
	wantOutcomes(t, res, Class0RTT, "0rtt")
	// On loopback the client's Finished can overtake the request's
	// processing, so the server sees some early requests with the
	// handshake complete; Used0RTT (checked above) is the proof.
	if got := early.Load(); got < 1 {
		t.Errorf("the server got none of %d requests in early data", n)
	}
	for i, s := range res.Samples {
		if s.Status != 200 || s.BodyBytes != 5 || s.Proto != "HTTP/3.0" {
			t.Errorf("sample %d: %s %d %d bytes", i, s.Proto, s.Status, s.BodyBytes)
		}
	}
}

// A server that refuses early data (0-RTT off): the 0rtt class is reported
// as "0rtt refused", never as 0rtt; a server that issues no tickets gives
// "not resumed" for both resumed and 0rtt.
func TestClassRefused(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) })
	cert := startTestServer(t, handler)
	certs := cert.certificates()

	no0RTT := startH3(t, handler, &tls.Config{Certificates: certs}, &quic.Config{Allow0RTT: false})
	res := classRun(t, no0RTT, H3, Class0RTT, 2)
	wantOutcomes(t, res, Class0RTT, Outcome0RTTRefused)

	noTickets := startH3(t, handler, &tls.Config{Certificates: certs, SessionTicketsDisabled: true}, nil)
	wantOutcomes(t, classRun(t, noTickets, H3, Class0RTT, 2), Class0RTT, OutcomeNotResumed)
	wantOutcomes(t, classRun(t, noTickets, H3, ClassResumed, 2), ClassResumed, OutcomeNotResumed)

	tcp := httptest.NewUnstartedServer(handler)
	tcp.EnableHTTP2 = true
	tcp.TLS = &tls.Config{SessionTicketsDisabled: true}
	tcp.StartTLS()
	t.Cleanup(tcp.Close)
	wantOutcomes(t, classRun(t, tcp.URL, H2, ClassResumed, 2), ClassResumed, OutcomeNotResumed)
}

// 0rtt over TCP, or any resumption over cleartext, is refused up front
// with the reason.
func TestClassUnsupported(t *testing.T) {
	for _, tc := range []struct {
		url   string
		proto Proto
		mix   Mix
		want  string
	}{
		{"https://127.0.0.1:1/", H2, Mix{{Class0RTT, 1}}, "no client 0-RTT (early data) over TCP"},
		{"https://127.0.0.1:1/", H1, Mix{{ClassNew, 1}, {Class0RTT, 1}}, "no client 0-RTT (early data) over TCP"},
		{"http://127.0.0.1:1/", H1, Mix{{ClassResumed, 1}}, "needs an https:// URL"},
		{"https://127.0.0.1:1/", H3, Mix{{"warm", 1}}, "must be new, resumed or 0rtt"},
	} {
		_, err := Run(t.Context(), Config{URL: tc.url, Proto: tc.proto, Mix: tc.mix})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s %v: error %v, want %q", tc.url, tc.proto, tc.mix, err, tc.want)
		}
	}
}

func TestParseMix(t *testing.T) {
	m, err := ParseMix("new=20, resumed=70,0rtt=10")
	if err != nil || m.String() != "new=20,resumed=70,0rtt=10" {
		t.Fatalf("%v %v", m, err)
	}
	if even, err := ParseMix("new,resumed"); err != nil || even.String() != "new=1,resumed=1" {
		t.Fatalf("%v %v", even, err)
	}
	for _, bad := range []string{"", "new=0", "new=-1", "new=x", "new=1,new=2", "cold=1", "new=99999999999"} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("ParseMix(%q) accepted", bad)
		}
	}
	// The picker deals each class its share, interleaved.
	p := newMixPicker(m)
	seen := map[Class]int{}
	for range 100 {
		seen[p.next()]++
	}
	if seen[ClassNew] != 20 || seen[ClassResumed] != 70 || seen[Class0RTT] != 10 {
		t.Errorf("dealt %v, want 20/70/10", seen)
	}
	p = newMixPicker(Mix{{ClassNew, 2}, {ClassResumed, 7}, {Class0RTT, 1}})
	seen = map[Class]int{}
	for i := range 30 {
		seen[p.next()]++
		if i == 9 && (seen[ClassNew] != 2 || seen[ClassResumed] != 7 || seen[Class0RTT] != 1) {
			t.Errorf("first 10 dealt %v, want 2/7/1", seen)
		}
	}
}

// A load run with a mix keeps one histogram per outcome, and the counts
// add up to the requests sent.
func TestLoadMix(t *testing.T) {
	skipClient0RTTUnderRace(t)
	srv := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) }))
	res, err := Load(t.Context(), LoadConfig{
		Config: Config{URL: srv.H3URL, Proto: H3, Insecure: true, Timeout: 5 * time.Second,
			Mix: Mix{{ClassNew, 1}, {ClassResumed, 2}, {Class0RTT, 1}}},
		Rate: 40, Duration: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	// One priming request per resuming class: each keeps tickets of its
	// own.
	if res.Warmup != 2 {
		t.Errorf("warmup %d, want 2 (resumed and 0rtt primed apart)", res.Warmup)
	}
	if res.Errors != 0 || res.Completed != 40 {
		t.Fatalf("completed %d errors %d %v", res.Completed, res.Errors, res.ErrorExamples)
	}
	want := map[string]int{"new": 10, "resumed": 20, "0rtt": 10}
	for name, n := range want {
		if o := res.Outcomes[name]; o == nil || o.Count != n {
			t.Errorf("outcome %s: %+v, want %d requests", name, o, n)
		}
	}
	if len(res.Outcomes) != len(want) {
		t.Errorf("outcomes %v, want only %v", res.Outcomes, want)
	}
	sum := 0
	for _, s := range res.Timeline {
		sum += s.Completed
	}
	if sum != 40 {
		t.Errorf("timeline %v counts %d responses, want 40", res.Timeline, sum)
	}
}

// startH3 serves handler over HTTP/3 on a loopback UDP port of its own.
func startH3(t *testing.T, h http.Handler, tlsConf *tls.Config, quicConf *quic.Config) string {
	t.Helper()
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http3.Server{Handler: h, TLSConfig: http3.ConfigureTLSConfig(tlsConf), QUICConfig: quicConf}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(udp)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		srv.Close()
		udp.Close()
		<-done
	})
	return "https://" + udp.LocalAddr().String()
}

// ParseMix takes any string from the command line: it never panics, and a
// mix it accepts prints back to one it parses the same.
func FuzzParseMix(f *testing.F) {
	for _, seed := range []string{"new=20,resumed=70,0rtt=10", "new,resumed", "0rtt", "new=0", "new=1,new=2", " resumed = 3 ", "=,=", "new=99999999999999999999"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMix(s)
		if err != nil {
			return
		}
		again, err := ParseMix(m.String())
		if err != nil || again.String() != m.String() {
			t.Fatalf("%q parsed as %q, which parses as %q (%v)", s, m.String(), again.String(), err)
		}
		if len(m) == 0 || len(m) > 3 {
			t.Fatalf("%q: %d classes", s, len(m))
		}
	})
}
