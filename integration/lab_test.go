package integration

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/edgebench"
)

// The edge lab: what a PoP near the caller buys when the origin is far away,
// and the two settings a PoP gets wrong most easily (caller identity and
// keep-alive idle timeouts). Distances come from the relays in latency_relay_test.go.

// labPhone is a client that dials from its own loopback address (Linux
// routes all of 127/8 to lo), so each phone is a different caller. Over TLS
// it names localhost, the PoP's site, whatever address it dials.
func labPhone(ip string) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext:        dialer.DialContext,
			TLSClientConfig:    &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"},
			ForceAttemptHTTP2:  true,
			DisableCompression: true,
		},
	}
}

// labDo sends a request and returns its status and body; a transport error
// is status 0 with the error as the body.
func labDo(client *http.Client, method, url, body string) (int, string) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(b)
}

// TestLabPhones: two phones behind one PoP. With client_ip at the origin
// trusting the PoP, the origin's throttle sees each phone and gives each its
// own budget; without it every request seems to come from the PoP, and the
// second phone is refused once the first has spent the shared budget.
func TestLabPhones(t *testing.T) {
	origin := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {
	handle /with-client-ip {
		client_ip {
			trusted_proxies 127.0.0.1
		}
		throttle {
			zone with {
				rate 2/1m
				burst 1
			}
		}
		respond "caller {client_ip}"
	}
	handle /without-client-ip {
		throttle {
			zone without {
				rate 2/1m
				burst 1
			}
		}
		respond "caller {client_ip}"
	}
}`)
	// The origin's site answers its own address only, so the PoP names it.
	pop := StartCaddy(t, fmt.Sprintf(`http://{$HOST}:{$HTTP_PORT} {
	reverse_proxy %s {
		header_up Host {upstream_hostport}
	}
}`, origin.HTTPAddr()))
	phoneA, phoneB := labPhone("127.0.0.2"), labPhone("127.0.0.3")

	type step struct {
		phone  *http.Client
		name   string
		status int
		body   string
	}
	for _, tc := range []struct {
		path  string
		steps []step
	}{
		{"/with-client-ip", []step{
			{phoneA, "A", 200, "caller 127.0.0.2"},
			{phoneA, "A", 200, "caller 127.0.0.2"},
			{phoneA, "A", 429, ""},
			{phoneB, "B", 200, "caller 127.0.0.3"},
			{phoneB, "B", 200, "caller 127.0.0.3"},
			{phoneB, "B", 429, ""},
		}},
		{"/without-client-ip", []step{
			{phoneA, "A", 200, "caller 127.0.0.1"},
			{phoneA, "A", 200, "caller 127.0.0.1"},
			{phoneB, "B", 429, ""},
			{phoneA, "A", 429, ""},
		}},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/"), func(t *testing.T) {
			for i, s := range tc.steps {
				status, body := labDo(s.phone, http.MethodGet, pop.URL(tc.path), "")
				if status != s.status || (s.body != "" && body != s.body) {
					t.Fatalf("request %d from phone %s: %d %q, want %d %q", i+1, s.name, status, body, s.status, s.body)
				}
			}
		})
	}
}

// labOrigin is a far origin: a Go server with a known keep-alive idle
// timeout behind a relay that adds oneWay each way. It counts the
// connections it accepts.
type labOrigin struct {
	addr  string // the relay's address: where the PoP dials
	conns atomic.Int64
}

func labStartOrigin(t *testing.T, idleTimeout, oneWay time.Duration) *labOrigin {
	t.Helper()
	o := &labOrigin{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	srv.Config.IdleTimeout = idleTimeout
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			o.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	o.addr = StartTCPRelay(t, "127.0.0.1:0", srv.Listener.Addr().String(), oneWay).Addr()
	return o
}

// TestLabIdleTimeout: a PoP keeps idle connections to a far origin. When
// the origin closes one, its FIN needs a one-way delay to reach the PoP;
// a request the PoP sends on that connection meanwhile fails (502), and a
// POST cannot be retried. So the PoP's idle timeout must be shorter than the
// origin's by more than a round trip: then the PoP always closes first.
func TestLabIdleTimeout(t *testing.T) {
	const oneWay = 125 * time.Millisecond // a 250 ms round trip to the origin
	pop := func(t *testing.T, origin *labOrigin, keepalive time.Duration) *Caddy {
		return StartCaddy(t, fmt.Sprintf(`http://{$HOST}:{$HTTP_PORT} {
	reverse_proxy %s {
		transport http {
			keepalive %s
		}
	}
}`, origin.addr, keepalive))
	}
	// post sends a POST after gap (timed from the previous answer) and
	// reports whether it failed.
	post := func(t *testing.T, c *Caddy, client *http.Client, gap time.Duration) bool {
		time.Sleep(gap)
		status, body := labDo(client, http.MethodPost, c.URL("/form"), "name=value")
		if status != 200 {
			t.Logf("after %v idle: %d %.80q", gap, status, body)
			return true
		}
		return false
	}

	t.Run("pop shorter", func(t *testing.T) {
		t.Parallel()
		const originIdle, popIdle = 1500 * time.Millisecond, time.Second
		origin := labStartOrigin(t, originIdle, oneWay)
		c := pop(t, origin, popIdle)
		client := c.Client()
		gaps := []time.Duration{
			0,
			300 * time.Millisecond,         // reused
			popIdle - 100*time.Millisecond, // reused just before the PoP gives up
			popIdle + 100*time.Millisecond, // the PoP has closed: fresh connection
			originIdle - oneWay,            // where the inverted setting fails
			originIdle + 100*time.Millisecond,
		}
		failed := 0
		for _, gap := range gaps {
			if post(t, c, client, gap) {
				failed++
			}
		}
		if failed != 0 {
			t.Errorf("%d of %d requests failed with the PoP's idle timeout (%v) shorter than the origin's (%v)", failed, len(gaps), popIdle, originIdle)
		}
		if n := origin.conns.Load(); n >= int64(len(gaps)) {
			t.Errorf("the origin accepted %d connections for %d requests: the PoP never reused one", n, len(gaps))
		}
	})

	t.Run("pop longer", func(t *testing.T) {
		t.Parallel()
		const originIdle, popIdle = time.Second, 10 * time.Second
		origin := labStartOrigin(t, originIdle, oneWay)
		c := pop(t, origin, popIdle)
		client := c.Client()
		// The PoP reuses its connection after originIdle - oneWay: the
		// origin has just closed it and the FIN is half way.
		// A failed connection is dropped, so each try first warms a
		// fresh one.
		const tries = 4
		failed := 0
		for range tries {
			post(t, c, client, 0)
			if post(t, c, client, originIdle-oneWay) {
				failed++
			}
		}
		t.Logf("%d of %d requests failed with the PoP's idle timeout (%v) longer than the origin's (%v)", failed, tries, popIdle, originIdle)
		if failed < tries/2 {
			t.Errorf("only %d of %d requests in the race window failed: the failure mode did not show", failed, tries)
		}
	})
}

// The lab's distances: a phone 20 ms from its PoP, the origin 250 ms away
// from both (round trips).
const (
	labShortOneWay = 10 * time.Millisecond
	labLongOneWay  = 125 * time.Millisecond
)

// labRow is one path of the lab and what round-trip arithmetic predicts
// for it.
type labRow struct {
	name          string
	cfg           edgebench.Config
	wantHandshake time.Duration
	wantTTFB      time.Duration
	// serverTime, when set, is part of wantTTFB: the fastest first byte
	// of the same requests sent to the PoP on loopback, less the long
	// round trip.
	serverTime time.Duration
	res        *edgebench.Result
}

// TestEdgeLab puts a phone far from an origin and near a PoP, and measures
// cold connections each way (go test -race -run TestEdgeLab -v
// ./integration/ prints the table). Directly, a first byte costs three long
// round trips (TCP, TLS, the request). Through a PoP holding a warm
// connection to the origin it costs three short ones and one long one; over
// HTTP/3, whose handshake carries TLS, two short ones and one long one.
func TestEdgeLab(t *testing.T) {
	script, err := os.ReadFile("../brotli/testdata/corpus/d3.min.js")
	if err != nil {
		t.Fatal(err)
	}
	var originSawXFF atomic.Value
	var originEarly labEarlyLog
	originSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		originSawXFF.Store(r.Header.Get("X-Forwarded-For"))
		if r.Method != http.MethodGet {
			io.Copy(io.Discard, r.Body)
			originEarly.add(r.Method + " " + r.URL.Path + " Early-Data=" + r.Header.Get("Early-Data"))
			io.WriteString(w, "stored")
			return
		}
		w.Header().Set("Content-Type", "application/javascript")
		w.Header().Set("ETag", `"d3-7.9.0"`)
		w.Write(script)
	}))
	originSrv.EnableHTTP2 = true
	originSrv.StartTLS()
	t.Cleanup(originSrv.Close)
	long := StartTCPRelay(t, "127.0.0.1:0", originSrv.Listener.Addr().String(), labLongOneWay)

	// The PoP: TLS, HTTP/3, the caller from client_ip (phones are never its
	// trusted load balancer at 127.0.0.1), a generous throttle, a rewrite,
	// br, and a warm keep-alive connection to the far origin.
	pop := StartCaddy(t, fmt.Sprintf(`https://localhost:{$HTTPS_PORT} {
	tls internal
	# Where each request's time went, for edgebench's split.
	server_timing
	client_ip {
		trusted_proxies 127.0.0.1
	}
	throttle {
		zone phones {
			rate 1000/1m
			burst 100
		}
	}
	# Early data can be replayed: orders must not be.
	@replayable_order {
		path /orders/*
		tls early_data
		not method GET HEAD OPTIONS
	}
	respond @replayable_order 425
	encode br
	substitute {
		replace "// https://d3js.org" "// https://d3js.org via the PoP for {client_ip}"
		types application/javascript
	}
	# A PoP with no pool: every request opens its own connection to the
	# origin.
	@cold_pool path /cold/*
	reverse_proxy @cold_pool https://%[1]s {
		header_up Host {upstream_hostport}
		transport http {
			tls_insecure_skip_verify
			keepalive off
		}
	}
	reverse_proxy https://%[1]s {
		header_up Host {upstream_hostport}
		transport http {
			tls_insecure_skip_verify
			keepalive 5m
		}
	}
}`, long.Addr()))
	pop.WaitHTTPS(t)
	// The phone reaches the PoP over the short link, TCP and UDP on one port.
	short := StartTCPRelay(t, fmt.Sprintf("127.0.0.1:%d", FreePort(t)), pop.HTTPSAddr(), labShortOneWay)
	StartUDPRelay(t, short.Addr(), pop.HTTPSAddr(), labShortOneWay)

	const phone = "127.0.0.2"
	popURL := "https://" + short.Addr() + "/d3.min.js"
	coldPoolURL := "https://" + short.Addr() + "/cold/d3.min.js"
	// A first request through the PoP opens its connection to the origin
	// and shows the PoP's work on the script.
	req, _ := http.NewRequest(http.MethodGet, popURL, nil)
	req.Host = "localhost"
	resp, err := labPhone(phone).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "// https://d3js.org via the PoP for " + phone + " v7.9.0"; resp.StatusCode != 200 || !bytes.HasPrefix(body, []byte(want)) {
		t.Fatalf("through the PoP: %d %.80q, want the script starting %q", resp.StatusCode, body, want)
	}
	if xff, _ := originSawXFF.Load().(string); xff != phone {
		t.Errorf("the origin saw X-Forwarded-For %q, want the phone %s", xff, phone)
	}

	const cold = 5
	shortRTT, longRTT := 2*labShortOneWay, 2*labLongOneWay
	header := func(kv ...string) http.Header {
		h := http.Header{"Host": {"localhost"}}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	config := func(url string, proto edgebench.Proto, h http.Header) edgebench.Config {
		return edgebench.Config{URL: url, Proto: proto, Cold: true, Requests: cold, Header: h, Insecure: true, LocalAddr: phone}
	}
	rows := []*labRow{
		// TCP and TLS 1.3 take a round trip each before the request's.
		{name: "direct h2", cfg: config("https://"+long.Addr()+"/d3.min.js", edgebench.H2, header("Accept-Encoding", "br")),
			wantHandshake: 2 * longRTT, wantTTFB: 3 * longRTT},
		{name: "PoP h2 identity", cfg: config(popURL, edgebench.H2, header()),
			wantHandshake: 2 * shortRTT, wantTTFB: 3*shortRTT + longRTT},
		{name: "PoP h2 br", cfg: config(popURL, edgebench.H2, header("Accept-Encoding", "br")),
			wantHandshake: 2 * shortRTT, wantTTFB: 3*shortRTT + longRTT},
		// QUIC carries TLS in its own handshake: one round trip fewer.
		{name: "PoP h3 br", cfg: config(popURL, edgebench.H3, header("Accept-Encoding", "br")),
			wantHandshake: shortRTT, wantTTFB: 2*shortRTT + longRTT},
		// A returning phone. A resumed TLS 1.3 handshake skips the
		// certificate (its signature and verification: CPU), not a round
		// trip.
		// Identity, as Brotli's time at the PoP varies more than 5%
		// (under -race above all).
		{name: "PoP h2 resumed", cfg: classConfig(config(popURL, edgebench.H2, header()), edgebench.ClassResumed),
			wantHandshake: 2 * shortRTT, wantTTFB: 3*shortRTT + longRTT},
		// A PoP without a warm pool pays the origin's TCP and TLS round
		// trips too.
		{name: "PoP h2 cold pool", cfg: config(coldPoolURL, edgebench.H2, header()),
			wantHandshake: 2 * shortRTT, wantTTFB: 3*shortRTT + 3*longRTT},
	}
	// quic-go v0.63.0's client races with itself on 0-RTT
	// (quic-go/quic-go#4303): under -race the 0-RTT row and the early-data
	// check are left out, and .ci/run runs this test again without -race.
	if raceEnabled {
		t.Log("0-RTT row and early data left out under -race (quic-go/quic-go#4303); run without -race for them")
	} else {
		// 0-RTT: the request rides in the first flight; the first byte
		// costs the short round trip and the long one.
		rows = append(rows, &labRow{name: "PoP h3 0-RTT", cfg: classConfig(config(popURL, edgebench.H3, header()), edgebench.Class0RTT),
			wantHandshake: 0, wantTTFB: shortRTT + longRTT})
	}
	for _, row := range rows {
		res, err := edgebench.Run(t.Context(), row.cfg)
		if err != nil {
			t.Fatalf("%s: %v", row.name, err)
		}
		if res.Errors != 0 || res.Statuses[200] != row.cfg.Requests {
			t.Fatalf("%s: %d errors, statuses %v; want %d x 200", row.name, res.Errors, res.Statuses, row.cfg.Requests)
		}
		row.res = res
	}
	// The returning phone's rows: every request was of its class (an
	// outcome such as "0rtt refused" would be counted apart), and its
	// first byte cost what the round trips and the server's time say,
	// within 5%. The server's time is everything but the short link: the
	// same class of request sent to the PoP on loopback, less the long
	// round trip it includes (so it holds the PoP's work and both sides'
	// handshake CPU, ML-KEM key shares included, slow under -race). A
	// loaded machine only adds time, so both sides take their fastest
	// request.
	loopURL := "https://" + pop.HTTPSAddr() + "/d3.min.js"
	for _, row := range rows {
		if len(row.cfg.Mix) == 0 {
			continue
		}
		class := row.cfg.Mix[0].Class
		if o := row.res.Outcomes[string(class)]; o == nil || o.Count != row.cfg.Requests || len(row.res.Outcomes) != 1 {
			t.Errorf("%s: outcomes %v, want %d requests of %s", row.name, row.res.Outcomes, row.cfg.Requests, class)
		}
		onLoop := row.cfg
		onLoop.URL, onLoop.Requests = loopURL, 8
		loop, err := edgebench.Run(t.Context(), onLoop)
		if err != nil || loop.Errors != 0 || loop.Statuses[200] != onLoop.Requests || loop.Outcomes[string(class)] == nil {
			t.Fatalf("%s on loopback: %v (%d errors, statuses %v, outcomes %v)", row.name, err, loop.Errors, loop.Statuses, loop.Outcomes)
		}
		row.serverTime = max(labFastestTTFB(loop)-longRTT, 0)
		row.wantTTFB += row.serverTime
		fastest := labFastestTTFB(row.res)
		t.Logf("%s: fastest TTFB %v, round trips %v + server %v = %v", row.name, fastest, row.wantTTFB-row.serverTime, row.serverTime, row.wantTTFB)
		if fastest < row.wantTTFB*95/100 || fastest > row.wantTTFB*105/100 {
			t.Errorf("%s: fastest TTFB %v, want %v (round trips and server time) within 5%%", row.name, fastest, row.wantTTFB)
		}
	}
	var table strings.Builder
	labWriteTable(&table, rows)
	table.WriteString("\n")
	labWriteSplit(&table, rows, shortRTT)
	table.WriteString("\n")
	results := make([]*edgebench.Result, len(rows))
	for i, row := range rows {
		results[i] = row.res
	}
	edgebench.WriteTable(&table, results...)
	t.Logf("phone %v RTT from the PoP, origin %v RTT from both; %d cold connections per row (%d for a returning phone, after a priming one)\n%s",
		shortRTT, longRTT, cold, labReturning, table.String())

	if path := os.Getenv("EDGEKIT_LAB_HTML"); path != "" {
		if err := labWriteHTML(path, rows); err != nil {
			t.Errorf("writing the lab's HTML report: %v", err)
		}
	}
	if !raceEnabled {
		labEarlyData(t, "https://"+short.Addr(), phone, &originEarly)
	}
	labCheckSplit(t, rows, shortRTT, longRTT)

	direct, popH2, popIdentity, popH3 := rows[0].res, rows[2].res, rows[1].res, rows[3].res
	// Nothing beats the speed of light: the relays charge every round trip.
	if direct.TTFB.P50 < rows[0].wantTTFB-20*time.Millisecond {
		t.Errorf("direct TTFB p50 %v is below the %v three long round trips cost: the relay does not delay", direct.TTFB.P50, rows[0].wantTTFB)
	}
	if popH2.TTFB.P50 >= direct.TTFB.P50*7/10 {
		t.Errorf("TTFB p50 via the PoP %v, direct %v: want the PoP well under (< 0.7x)", popH2.TTFB.P50, direct.TTFB.P50)
	}
	if popH3.TTFB.P50 >= direct.TTFB.P50*7/10 {
		t.Errorf("TTFB p50 via the PoP over h3 %v, direct %v: want < 0.7x", popH3.TTFB.P50, direct.TTFB.P50)
	}
	// QUIC saves a short round trip, 20 ms, which TLS and QUIC's own CPU
	// work (slow under -race, on a busy machine) can hide; so compare the
	// time each handshake spent waiting on the link: through the relays
	// minus the same handshakes on loopback.
	wait := map[edgebench.Proto]time.Duration{}
	for _, r := range []struct {
		proto edgebench.Proto
		link  *edgebench.Result
	}{{edgebench.H2, popH2}, {edgebench.H3, popH3}} {
		loop, err := edgebench.Run(t.Context(), config(loopURL, r.proto, header("Accept-Encoding", "br")))
		if err != nil || loop.Errors != 0 || loop.Statuses[200] != cold {
			t.Fatalf("%s on loopback: %v (%d errors, statuses %v; want %d x 200)", r.proto, err, loop.Errors, loop.Statuses, cold)
		}
		wait[r.proto] = r.link.Handshake.P50 - loop.Handshake.P50
	}
	t.Logf("handshake p50 waiting on the link: h2 %v (2 round trips: %v), h3 %v (1: %v)", wait[edgebench.H2], 2*shortRTT, wait[edgebench.H3], shortRTT)
	if wait[edgebench.H3] >= wait[edgebench.H2] {
		t.Errorf("handshake p50 waiting on the link: h3 %v, h2 %v: QUIC should save the TCP round trip", wait[edgebench.H3], wait[edgebench.H2])
	}
	if popH2.BodyBytes >= popIdentity.BodyBytes || popIdentity.BodyBytes < int64(len(script)) {
		t.Errorf("script bytes via the PoP: br %d, identity %d (origin file %d): want br smaller", popH2.BodyBytes, popIdentity.BodyBytes, len(script))
	}
}

// labFastestTTFB is the smallest TTFB of a run's successful requests.
func labFastestTTFB(res *edgebench.Result) time.Duration {
	var fastest time.Duration
	for _, s := range res.Samples {
		if s.Err == nil && (fastest == 0 || s.TTFB < fastest) {
			fastest = s.TTFB
		}
	}
	return fastest
}

// labReturning is how many requests a returning phone's row measures: more
// than the other rows, as its fastest is held to 5%.
const labReturning = 8

// classConfig measures labReturning requests as one connection class (each
// a fresh connection, after one unmeasured request for a ticket).
func classConfig(cfg edgebench.Config, class edgebench.Class) edgebench.Config {
	cfg.Mix = edgebench.Mix{{Class: class, Weight: 1}}
	cfg.Requests = labReturning
	return cfg
}

// labWriteTable prints each row's median handshake and TTFB beside what the
// round trips predict, and the script's bytes on the wire.
func labWriteTable(w io.Writer, rows []*labRow) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)) }
	diff := func(got, want time.Duration) string {
		return fmt.Sprintf("%+.0f", float64(got-want)/float64(time.Millisecond))
	}
	fmt.Fprintf(w, "%-16s %29s %39s\n", "", "handshake p50 ms", "TTFB p50 ms")
	fmt.Fprintf(w, "%-16s %9s %9s %9s %9s %9s %9s %9s %13s\n", "path", "measured", "expected", "diff", "measured", "expected", "(server)", "diff", "script bytes")
	for _, r := range rows {
		server := "-"
		if r.serverTime > 0 {
			server = ms(r.serverTime)
		}
		fmt.Fprintf(w, "%-16s %9s %9s %9s %9s %9s %9s %9s %13d\n", r.name,
			ms(r.res.Handshake.P50), ms(r.wantHandshake), diff(r.res.Handshake.P50, r.wantHandshake),
			ms(r.res.TTFB.P50), ms(r.wantTTFB), server, diff(r.res.TTFB.P50, r.wantTTFB), r.res.BodyBytes)
	}
}
