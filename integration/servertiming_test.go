package integration

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/caddy-edgekit/edgekit/internal/edgebench"
	"github.com/caddy-edgekit/edgekit/internal/loopback"
)

// originDelay is how long the timing origin waits before its header: the
// origin entry must be at least this.
const originDelay = 30 * time.Millisecond

// timingOrigin serves, on a loopback address of its own (TLS when tlsOn):
// /fixed a body with Content-Length after originDelay, /stream a body of
// unknown length in flushed parts after originDelay.
func timingOrigin(t *testing.T, tlsOn bool) string {
	t.Helper()
	host := loopback.Claim(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(originDelay)
		switch {
		case strings.HasSuffix(r.URL.Path, "/trailer"):
			// The origin's own Server-Timing trailer, declared.
			w.Header().Set("Trailer", "Server-Timing")
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "body\n")
			http.NewResponseController(w).Flush()
			w.Header().Set("Server-Timing", "app-end;dur=2")
		case strings.HasSuffix(r.URL.Path, "/stream"):
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Server-Timing", `app;dur=1.5;desc="origin's own"`)
			for i := range 3 {
				fmt.Fprintf(w, "part %d\n", i)
				http.NewResponseController(w).Flush()
			}
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "6")
			io.WriteString(w, "fixed\n")
		}
	}))
	srv.Listener.Close()
	srv.Listener = ln
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return ln.Addr().String()
}

// timingEntries parses the Server-Timing fields of h (under any spelling of
// the name) into name -> metric, failing on a repeated name.
func timingEntries(t *testing.T, h http.Header) map[string]edgebench.ServerTimingMetric {
	t.Helper()
	var values []string
	for k, v := range h {
		if strings.EqualFold(k, "Server-Timing") {
			values = append(values, v...)
		}
	}
	m := map[string]edgebench.ServerTimingMetric{}
	for _, e := range edgebench.ParseServerTiming(values...) {
		if _, dup := m[e.Name]; dup {
			t.Fatalf("entry %s twice in %q", e.Name, values)
		}
		m[e.Name] = e
	}
	return m
}

func names(m map[string]edgebench.ServerTimingMetric) []string {
	var n []string
	for k := range m {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

const timingSites = `
https://localhost:{$HTTPS_PORT} {
	tls internal
	@rum header X-RUM 1
	server_timing @rum {
		timing_allow_origin https://app.example.com
	}
	handle /plain/* {
		reverse_proxy %s
	}
	handle /modules/* {
		throttle {
			zone per_ip {
				rate 1000/1s
			}
		}
		substitute {
			types text/plain
			replace part piece
		}
		reverse_proxy %s
	}
	handle /tls/* {
		reverse_proxy https://%s {
			transport http {
				tls_insecure_skip_verify
			}
		}
	}
}
http://{$HOST}:{$HTTP_PORT} {
	server_timing
	reverse_proxy %s
}`

// TestServerTimingGoClient: a Caddy PoP with server_timing (limited to
// requests with X-RUM: 1) in front of a plaintext and a TLS origin, asked
// by Go's HTTP/1.1, HTTP/2 and quic-go's HTTP/3 clients.
func TestServerTimingGoClient(t *testing.T) {
	plain, secure := timingOrigin(t, false), timingOrigin(t, true)
	c := StartCaddy(t, fmt.Sprintf(timingSites, plain, plain, secure, plain))
	c.WaitHTTPS(t)
	h2 := c.Client()
	get := func(t *testing.T, client *http.Client, method, url string, rum bool) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, nil)
		if rum {
			req.Header.Set("X-RUM", "1")
		}
		resp, body := Do(t, client, req)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: status %d %q", method, url, resp.StatusCode, body)
		}
		return resp, body
	}

	t.Run("conn new then reused", func(t *testing.T) {
		for _, tc := range []struct{ path, tlsEntry string }{{"/plain/fixed", ""}, {"/tls/fixed", "origin-tls"}} {
			first, _ := get(t, h2, "GET", c.HTTPSURL(tc.path), true)
			e := timingEntries(t, first.Header)
			if e["origin-conn"].Desc != "new" || !e["origin-dial"].HasDur {
				t.Fatalf("%s first request: %v; want origin-conn new with origin-dial", tc.path, first.Header["Server-Timing"])
			}
			_, hasTLS := e["origin-tls"]
			if hasTLS != (tc.tlsEntry != "") {
				t.Errorf("%s: origin-tls present %v, want %v: %v", tc.path, hasTLS, tc.tlsEntry != "", first.Header["Server-Timing"])
			}
			if d := e["origin"].Dur; d < originDelay {
				t.Errorf("%s: origin %v, less than the origin's own %v wait", tc.path, d, originDelay)
			}
			if edge := e["edge"]; !edge.HasDur || edge.Dur >= e["origin"].Dur {
				t.Errorf("%s: edge %v not below origin %v: the upstream wait is not subtracted", tc.path, edge.Dur, e["origin"].Dur)
			}
			if e["client"].Desc != "h2 tls=new" {
				t.Errorf("client desc %q, want h2 tls=new", e["client"].Desc)
			}
			if !e["rtt"].HasDur {
				t.Errorf("no rtt over TCP: %v", first.Header["Server-Timing"])
			}
			if got := first.Header.Get("Timing-Allow-Origin"); got != "https://app.example.com" {
				t.Errorf("Timing-Allow-Origin %q", got)
			}
			second, _ := get(t, h2, "GET", c.HTTPSURL(tc.path), true)
			e = timingEntries(t, second.Header)
			if e["origin-conn"].Desc != "reused" {
				t.Fatalf("%s second request: %v; want origin-conn reused", tc.path, second.Header["Server-Timing"])
			}
			for _, n := range []string{"origin-dial", "origin-tls"} {
				if _, ok := e[n]; ok {
					t.Errorf("%s second request has %s on a reused connection", tc.path, n)
				}
			}
			// Nothing names the origin (its addresses are loopback ones
			// no duration can spell).
			for _, v := range append(first.Header["Server-Timing"], second.Header["Server-Timing"]...) {
				for _, up := range []string{plain, secure} {
					if host, _, _ := net.SplitHostPort(up); strings.Contains(v, host) {
						t.Errorf("Server-Timing %q names the origin %s", v, host)
					}
				}
			}
		}
	})

	t.Run("trailer", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			client *http.Client
			desc   string
		}{{"h2", h2, "h2 tls=new"}, {"h3", c.H3Client(), "h3 tls=new"}} {
			t.Run(tc.name, func(t *testing.T) {
				req, _ := http.NewRequest("GET", c.HTTPSURL("/plain/stream"), nil)
				req.Header.Set("X-RUM", "1")
				resp, err := tc.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				// Before the body: the clients move the header's Trailer
				// announcement into resp.Trailer's keys.
				if v, announced := resp.Trailer["Server-Timing"]; !announced || v != nil {
					t.Errorf("Trailer does not announce Server-Timing in the header: %v", resp.Trailer)
				}
				b, err := io.ReadAll(resp.Body)
				if err != nil || string(b) != "part 0\npart 1\npart 2\n" {
					t.Fatalf("body %q, %v", b, err)
				}
				head := timingEntries(t, resp.Header)
				if head["client"].Desc != tc.desc || !head["edge"].HasDur || head["origin"].Dur < originDelay {
					t.Errorf("header entries %v", resp.Header)
				}
				if !head["rtt"].HasDur || head["rtt"].Dur <= 0 {
					t.Errorf("no client rtt over %s: %v", tc.name, resp.Header)
				}
				if _, ok := head["app"]; !ok {
					t.Errorf("the origin's own entry is lost from the header: %v", resp.Header)
				}
				trailer := timingEntries(t, resp.Trailer)
				if names(trailer)[0] != "total" || len(trailer) != 1 {
					t.Fatalf("trailer %v; want total alone", resp.Trailer)
				}
				if total := trailer["total"].Dur; total < head["edge"].Dur+head["origin"].Dur {
					t.Errorf("total %v less than edge %v + origin %v", total, head["edge"].Dur, head["origin"].Dur)
				}
			})
		}
	})

	t.Run("origin's own trailer", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			client *http.Client
		}{{"h2", h2}, {"h3", c.H3Client()}} {
			resp, body := get(t, tc.client, "GET", c.HTTPSURL("/plain/trailer"), true)
			if body != "body\n" {
				t.Fatalf("%s: body %q", tc.name, body)
			}
			if n := names(timingEntries(t, resp.Trailer)); !slices.Equal(n, []string{"app-end", "total"}) {
				t.Errorf("%s: trailer entries %v (%v); want the origin's and total", tc.name, n, resp.Trailer)
			}
			if e := timingEntries(t, resp.Header); !e["edge"].HasDur {
				t.Errorf("%s: no header entries: %v", tc.name, resp.Header)
			}
		}
	})

	t.Run("throttle and substitute", func(t *testing.T) {
		resp, body := get(t, h2, "GET", c.HTTPSURL("/modules/stream"), true)
		if body != "piece 0\npiece 1\npiece 2\n" {
			t.Fatalf("body %q: substitute did not run", body)
		}
		if e := timingEntries(t, resp.Header)["throttle"]; !e.HasDur {
			t.Errorf("no throttle entry in the header: %v", resp.Header)
		}
		tr := timingEntries(t, resp.Trailer)
		if !tr["total"].HasDur || !tr["substitute"].HasDur {
			t.Errorf("trailer %v; want total and substitute", resp.Trailer)
		}
		if tr["substitute"].Dur > tr["total"].Dur {
			t.Errorf("substitute %v longer than total %v", tr["substitute"].Dur, tr["total"].Dur)
		}
	})

	t.Run("h3 0-RTT", func(t *testing.T) {
		cl := c.H3Client()
		tr := cl.Transport.(*http3.Transport)
		defer tr.Close()
		tr.TLSClientConfig.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		var descs []string
		for _, method := range []string{http.MethodGet, http3.MethodGet0RTT} {
			resp, _ := get(t, cl, method, c.HTTPSURL("/plain/fixed"), true)
			descs = append(descs, timingEntries(t, resp.Header)["client"].Desc)
			tr.CloseIdleConnections()
		}
		if !slices.Equal(descs, []string{"h3 tls=new", "h3 tls=0rtt"}) {
			t.Errorf("a GET, then a GET in 0-RTT on a resumed connection: %q; want new then 0rtt", descs)
		}
	})

	t.Run("HEAD like GET", func(t *testing.T) {
		for _, path := range []string{"/plain/fixed", "/plain/stream"} {
			g, _ := get(t, h2, "GET", c.HTTPSURL(path), true)
			hd, body := get(t, h2, "HEAD", c.HTTPSURL(path), true)
			if body != "" {
				t.Fatalf("HEAD body %q", body)
			}
			if gn, hn := names(timingEntries(t, g.Header)), names(timingEntries(t, hd.Header)); !slices.Equal(gn, hn) {
				t.Errorf("%s: GET's entries %v, HEAD's %v", path, gn, hn)
			}
			if hd.Header.Get("Timing-Allow-Origin") != g.Header.Get("Timing-Allow-Origin") {
				t.Errorf("%s: HEAD's Timing-Allow-Origin differs", path)
			}
		}
	})

	t.Run("outside the matcher", func(t *testing.T) {
		for _, path := range []string{"/plain/fixed", "/plain/stream"} {
			resp, _ := get(t, h2, "GET", c.HTTPSURL(path), false)
			for k := range resp.Header {
				if strings.EqualFold(k, "Timing-Allow-Origin") || (strings.EqualFold(k, "Server-Timing") && !strings.HasPrefix(resp.Header.Get(k), "app;")) {
					t.Errorf("%s without X-RUM got %s: %q", path, k, resp.Header[k])
				}
			}
			if e := timingEntries(t, resp.Header); len(e) > 0 && !slices.Equal(names(e), []string{"app"}) {
				t.Errorf("%s without X-RUM got entries %v", path, names(e))
			}
			if resp.Header.Get("Trailer") != "" || len(resp.Trailer) > 0 {
				t.Errorf("%s without X-RUM got a trailer: %v %v", path, resp.Header["Trailer"], resp.Trailer)
			}
		}
	})

	t.Run("h1 plaintext and TLS resumption", func(t *testing.T) {
		resp, _ := get(t, c.Client(), "GET", c.URL("/fixed"), false)
		if d := timingEntries(t, resp.Header)["client"].Desc; d != "h1 tls=none" {
			t.Errorf("plain HTTP/1.1: client %q", d)
		}
		cl := c.Client()
		tr := cl.Transport.(*http.Transport)
		tr.TLSClientConfig.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		var descs []string
		for range 2 {
			resp, _ := get(t, cl, "GET", c.HTTPSURL("/plain/fixed"), true)
			descs = append(descs, timingEntries(t, resp.Header)["client"].Desc)
			tr.CloseIdleConnections()
		}
		if !slices.Equal(descs, []string{"h2 tls=new", "h2 tls=resumed"}) {
			t.Errorf("two connections with a session cache: %q; want new then resumed", descs)
		}
	})
}
