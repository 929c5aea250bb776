package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-edgekit/edgekit/internal/loopback"
)

// rawTimingResponses are what the raw origin writes, byte for byte, by path:
// Server-Timing lines net/http's server would never write.
var rawTimingResponses = map[string]string{
	"/malformed": "HTTP/1.1 200 OK\r\n" +
		"Server-Timing: app;desc=x\"y, edge;dur=0\r\n" +
		"Server-Timing: app;desc=\"a\"b\"c, edge;dur=0, db;dur=1\r\n" +
		"Server-Timing: app;x=1\"2, total;dur=0\r\n" +
		"Server-Timing: \"edge\";dur=0, edge=1;dur=0, ,, ,edge;dur=0,,db2\r\n" +
		"Server-Timing: late;desc=\"unterminated, edge;dur=0\r\n" +
		"Content-Length: 2\r\nConnection: close\r\n\r\nx\n",
	"/hints": "HTTP/1.1 100 Continue\r\n\r\n" +
		"HTTP/1.1 102 Processing\r\nServer-Timing: edge;dur=0\r\nTiming-Allow-Origin: *\r\n\r\n" +
		"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload; as=style\r\n" +
		"Server-Timing: edge;dur=0, hint;dur=1, x;desc=a\"b, total;dur=0\r\nTiming-Allow-Origin: *\r\n\r\n" +
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nx\n",
}

// rawTimingOrigin is an upstream that writes rawTimingResponses on a bare listener.
func rawTimingOrigin(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(loopback.Claim(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil {
					return
				}
				resp, ok := rawTimingResponses[req.URL.Path]
				if !ok {
					resp = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
				}
				_, _ = io.WriteString(conn, resp)
			})
		}
	})
	return ln.Addr().String()
}

const rawTimingSites = `
https://localhost:{$HTTPS_PORT} {
	tls internal
	server_timing {
		timing_allow_origin https://app.example.com
	}
	reverse_proxy %[1]s
}
http://{$HOST}:{$HTTP_PORT} {
	server_timing
	reverse_proxy %[1]s
}`

// TestServerTimingRawUpstream: through a real Caddy, over h1, h2 and h3,
// an upstream's malformed Server-Timing entries (a stray quote in a token
// that a browser would end the token at, a quoted name, an unterminated
// quote) and its PoP-named ones are dropped, its well-formed others kept
// after the PoP's entries, which come first; and its 100, 102 and 103 reach
// the client without its Timing-Allow-Origin or PoP-named entries.
func TestServerTimingRawUpstream(t *testing.T) {
	c := StartCaddyWith(t, Options{}, fmt.Sprintf(rawTimingSites, rawTimingOrigin(t)))
	c.WaitHTTPS(t)
	for _, p := range hostileProtocols(c) {
		t.Run(p.name+" malformed", func(t *testing.T) {
			resp, body := Get(t, p.client, c.HTTPSURL("/malformed"))
			if resp.StatusCode != http.StatusOK || body != "x\n" {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
			vals := fieldsNamed(resp.Header, "Server-Timing")
			if len(vals) < 2 || !strings.HasPrefix(vals[0], "edge;dur=") {
				t.Fatalf("Server-Timing %q: the PoP's value is not first", vals)
			}
			if up := strings.Join(vals[1:], " | "); up != "db;dur=1 | db2" {
				t.Errorf("upstream's entries %q, want db;dur=1 | db2", up)
			}
			e := timingEntries(t, resp.Header) // fails on a name twice
			if e["edge"].Dur <= 0 {
				t.Errorf("edge %+v: the upstream's edge;dur=0 was kept", e["edge"])
			}
		})
		t.Run(p.name+" 1xx", func(t *testing.T) {
			var mu sync.Mutex
			var early []textproto.MIMEHeader
			trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				mu.Lock()
				defer mu.Unlock()
				h2 := textproto.MIMEHeader{}
				for k, v := range h {
					h2[k] = append([]string{fmt.Sprint(code)}, v...)
				}
				early = append(early, h2)
				return nil
			}}
			req, _ := http.NewRequest("GET", c.HTTPSURL("/hints"), nil)
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
			resp, body := Do(t, p.client, req)
			if resp.StatusCode != http.StatusOK || body != "x\n" {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
			mu.Lock()
			defer mu.Unlock()
			saw103 := false
			for _, h := range early {
				for k, v := range h {
					switch strings.ToLower(k) {
					case "timing-allow-origin":
						t.Errorf("a %s carries the upstream's Timing-Allow-Origin %q", v[0], v[1:])
					case "server-timing":
						if got := strings.Join(v[1:], " | "); got != "hint;dur=1" {
							t.Errorf("a %s carries Server-Timing %q, want hint;dur=1 alone", v[0], got)
						}
					case "link":
						saw103 = true
					}
				}
			}
			if !saw103 {
				t.Errorf("no 103 with its Link reached the client: %v", early)
			}
			if e := timingEntries(t, resp.Header); e["edge"].Dur <= 0 {
				t.Errorf("final edge %+v", e["edge"])
			}
		})
	}
}
