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

	"github.com/caddy-edgekit/edgekit/internal/loopback"
)

// hintsDelay is how long the hostile origin's /103 waits between its 103
// and its 200: origin time, which edge must not take.
const hintsDelay = 60 * time.Millisecond

// hostileOrigin is an upstream that tries to control what server_timing
// sends: Timing-Allow-Origin as a trailer (declared, and undeclared under
// http.TrailerPrefix), Server-Timing entries with the PoP's names in the
// header and the trailer, a Server-Timing trailer of its own, and a 103
// followed by the final response after hintsDelay.
func hostileOrigin(t *testing.T) string {
	t.Helper()
	host := loopback.Claim(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		flush := func() { _ = http.NewResponseController(w).Flush() }
		switch {
		case strings.HasSuffix(r.URL.Path, "/tao-trailer"):
			h.Set("Trailer", "Timing-Allow-Origin")
			io.WriteString(w, "x\n")
			flush()
			h.Set("Timing-Allow-Origin", "*")
		case strings.HasSuffix(r.URL.Path, "/tao-prefix"):
			io.WriteString(w, "x\n")
			flush()
			h.Set(http.TrailerPrefix+"Timing-Allow-Origin", "*")
		case strings.HasSuffix(r.URL.Path, "/own-trailer"):
			h.Set("Trailer", "Server-Timing, X-Up-Trailer")
			io.WriteString(w, "x\n")
			flush()
			h.Set("Server-Timing", "uptrail;dur=1")
			h.Set("X-Up-Trailer", "yes")
		case strings.HasSuffix(r.URL.Path, "/forged-trailer"):
			h.Set("Trailer", "Server-Timing")
			io.WriteString(w, "x\n")
			flush()
			h.Set("Server-Timing", "uptrail;dur=1, total;dur=0, EDGE;dur=0")
		case strings.HasSuffix(r.URL.Path, "/forge"):
			h["Server-Timing"] = []string{`edge;dur=0, origin;dur=0, client;desc="h3 tls=0rtt"`,
				`app;desc="a, edge;dur=1", Rtt;dur=0`}
			h.Set("Timing-Allow-Origin", "*")
			h.Set("Content-Length", "2")
			io.WriteString(w, "x\n")
		case strings.HasSuffix(r.URL.Path, "/103"):
			h.Set("Link", "</style.css>; rel=preload; as=style")
			w.WriteHeader(http.StatusEarlyHints)
			time.Sleep(hintsDelay)
			h.Del("Link")
			h.Set("Content-Length", "2")
			io.WriteString(w, "x\n")
		default:
			h.Set("Content-Length", "2")
			io.WriteString(w, "x\n")
		}
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return ln.Addr().String()
}

const hostileSites = `
https://localhost:{$HTTPS_PORT} {
	tls internal
	server_timing {
		timing_allow_origin https://app.example.com
	}
	reverse_proxy %[1]s {
		header_down -Timing-Allow-Origin
	}
}
http://{$HOST}:{$HTTP_PORT} {
	server_timing
	handle /twice/* {
		server_timing {
			timing_allow_origin https://inner.example
		}
		reverse_proxy %[1]s
	}
	reverse_proxy %[1]s
}`

// h1TLSClient is the Caddy's client limited to HTTP/1.1.
func h1TLSClient(c *Caddy) *http.Client {
	cl := c.Client()
	tr := cl.Transport.(*http.Transport)
	tr.ForceAttemptHTTP2 = false
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	return cl
}

// hostileProtocols are the clients of the HTTPS site, by protocol.
func hostileProtocols(c *Caddy) []struct {
	name   string
	client *http.Client
} {
	return []struct {
		name   string
		client *http.Client
	}{{"h1", h1TLSClient(c)}, {"h2", c.Client()}, {"h3", c.H3Client()}}
}

// fieldsNamed returns the values of h under every spelling of name, the
// http.TrailerPrefix one too.
func fieldsNamed(h http.Header, name string) []string {
	var v []string
	for k, vv := range h {
		if strings.EqualFold(strings.TrimPrefix(k, http.TrailerPrefix), name) {
			v = append(v, vv...)
		}
	}
	return v
}

func hasField(h http.Header, name string) bool {
	for k := range h {
		if strings.EqualFold(strings.TrimPrefix(k, http.TrailerPrefix), name) {
			return true
		}
	}
	return false
}

func startHostile(t *testing.T) *Caddy {
	t.Helper()
	c := StartCaddyWith(t, Options{Global: "debug"}, fmt.Sprintf(hostileSites, hostileOrigin(t)))
	c.WaitHTTPS(t)
	return c
}

// TestServerTimingUpstreamTimingAllowOrigin: an upstream's
// Timing-Allow-Origin sent as a trailer (declared, or undeclared under
// http.TrailerPrefix) reaches the client neither in the trailer nor in the
// Trailer declaration, over HTTP/1.1, HTTP/2 and HTTP/3; the header keeps
// exactly the configured value (none on the site without one).
func TestServerTimingUpstreamTimingAllowOrigin(t *testing.T) {
	c := startHostile(t)
	check := func(t *testing.T, client *http.Client, url string, want []string) {
		t.Helper()
		resp, body := Get(t, client, url)
		if resp.StatusCode != http.StatusOK || body != "x\n" {
			t.Fatalf("%s: %d %q", url, resp.StatusCode, body)
		}
		if got := fieldsNamed(resp.Header, "Timing-Allow-Origin"); !slices.Equal(got, want) {
			t.Errorf("%s: header Timing-Allow-Origin %q, want %q (header %v)", url, got, want, resp.Header)
		}
		if hasField(resp.Trailer, "Timing-Allow-Origin") {
			t.Errorf("%s: the upstream's Timing-Allow-Origin reached the trailer: %v", url, resp.Trailer)
		}
		for _, v := range resp.Header["Trailer"] {
			if strings.Contains(strings.ToLower(v), "timing-allow-origin") {
				t.Errorf("%s: Trailer declares %q", url, v)
			}
		}
	}
	for _, path := range []string{"/tao-trailer", "/tao-prefix"} {
		for _, p := range hostileProtocols(c) {
			t.Run(p.name+path, func(t *testing.T) {
				check(t, p.client, c.HTTPSURL(path), []string{"https://app.example.com"})
			})
		}
		t.Run("h1 none configured"+path, func(t *testing.T) {
			check(t, c.Client(), c.URL(path), nil)
		})
	}
}
