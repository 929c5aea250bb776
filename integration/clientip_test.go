package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// client_ip end to end: a real Caddy runs client_ip then reverse_proxy to an
// origin that echoes what it received. Tests run on loopback, so the peer is
// 127.0.0.1 (or ::1): trusting loopback makes a request come "through the
// edge", trusting only TEST-NET-1 (192.0.2.0/24) makes it untrusted.

const clientIPSite = `
	log
	client_ip {
		trusted_proxies 127.0.0.1 ::1
		hops 2
		secret X-Edge-Secret {env.EDGE_SECRET}
	}
	@office client_ip 203.0.113.0/24
	request_header @office X-Office yes
	request_header X-Seen-Client {client_ip}
	request_header X-Seen-Peer {http.client_ip.peer}
	request_header X-Seen-Source {http.client_ip.source}
	request_header X-Seen-Via-Edge {http.client_ip.via_edge}
	reverse_proxy ORIGIN
`

func startClientIPCaddy(t *testing.T) *Caddy {
	t.Helper()
	origin := EchoOrigin(t)
	site := strings.ReplaceAll(clientIPSite, "ORIGIN", origin)
	return StartCaddyWith(t, Options{Env: []string{"EDGE_SECRET=pop-proves-itself"}}, `
http://{$HOST}:{$HTTP_PORT} {`+site+`}
https://localhost:{$HTTPS_PORT} {
	tls internal`+site+`}`)
}

// clientIPSpoofHeaders are what a caller bypassing the edge would write to
// pose as someone else.
var clientIPSpoofHeaders = map[string]string{
	"CF-Connecting-IP": "6.6.6.6",
	"X-Real-IP":        "6.6.6.6",
	"True-Client-IP":   "6.6.6.6",
	"Fastly-Client-IP": "6.6.6.6",
	"Forwarded":        "for=6.6.6.6",
}

func TestClientIPThroughTheEdge(t *testing.T) {
	c := startClientIPCaddy(t)
	c.WaitHTTPS(t)

	clientIPOverH1AndH3(t, c, "/through-edge", func(t *testing.T, client *http.Client, url, wantProto string) {
		// The PoP saw the caller 203.0.113.7, which had written its own
		// X-Forwarded-For; an internal hop on loopback came next.
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.7, 127.0.0.1")
		req.Header.Set("X-Edge-Secret", "pop-proves-itself")
		req.Header.Set("CF-Connecting-IP", "203.0.113.7")
		echo, proto := GetEcho(t, client, req)
		if proto != wantProto {
			t.Fatalf("spoke %s, want %s", proto, wantProto)
		}
		h := http.Header(echo.Headers)
		xff := h.Values("X-Forwarded-For")
		if len(xff) != 1 || !strings.HasPrefix(xff[0], "203.0.113.7, 127.0.0.1, ") {
			t.Errorf("origin saw X-Forwarded-For %q, want \"203.0.113.7, 127.0.0.1, <peer>\"", xff)
		}
		if v := h.Get("X-Edge-Secret"); v != "" {
			t.Errorf("the secret went upstream: %q", v)
		}
		// client_ip read X-Forwarded-For here: a CF-Connecting-IP is not
		// what the edge was believed for, whoever wrote it.
		if v := h.Values("CF-Connecting-IP"); v != nil {
			t.Errorf("CF-Connecting-IP %q reached the origin, though client_ip did not read it", v)
		}
		want := map[string]string{"X-Office": "yes", "X-Seen-Client": "203.0.113.7", "X-Seen-Source": "xff", "X-Seen-Via-Edge": "true"}
		for name, value := range want {
			if got := h.Get(name); got != value {
				t.Errorf("origin saw %s %q, want %q", name, got, value)
			}
		}
		if peer := h.Get("X-Seen-Peer"); peer != "127.0.0.1" && peer != "::1" {
			t.Errorf("{http.client_ip.peer} = %q, want a loopback address", peer)
		}
		entry := clientIPAccessLogEntry(t, c, req.URL.Path)
		if entry.Request.ClientIP != "203.0.113.7" || entry.ClientIP.Source != "xff" || !entry.ClientIP.ViaEdge || entry.ClientIP.Peer != h.Get("X-Seen-Peer") {
			t.Errorf("access log has request.client_ip %q and client_ip %+v, want 203.0.113.7 via xff from the edge", entry.Request.ClientIP, entry.ClientIP)
		}
	})
}

func TestClientIPCallerBypassingTheEdge(t *testing.T) {
	c := startClientIPCaddy(t)
	c.WaitHTTPS(t)

	clientIPOverH1AndH3(t, c, "/bypass", func(t *testing.T, client *http.Client, url, _ string) {
		for _, secret := range []string{"", "pop-proves-itselF"} {
			req, _ := http.NewRequest(http.MethodGet, url+"?secret="+secret, nil)
			req.Header.Set("X-Forwarded-For", "203.0.113.7, 127.0.0.1")
			if secret != "" {
				req.Header.Set("X-Edge-Secret", secret)
			}
			for name, value := range clientIPSpoofHeaders {
				req.Header.Set(name, value)
			}
			echo, _ := GetEcho(t, client, req)
			h := http.Header(echo.Headers)
			peer := h.Get("X-Seen-Peer")
			if peer != "127.0.0.1" && peer != "::1" {
				t.Fatalf("{http.client_ip.peer} = %q, want a loopback address", peer)
			}
			// reverse_proxy starts X-Forwarded-For afresh: just the peer.
			if xff := h.Values("X-Forwarded-For"); len(xff) != 1 || xff[0] != peer {
				t.Errorf("origin saw X-Forwarded-For %q, want just the peer %s", xff, peer)
			}
			for name := range clientIPSpoofHeaders {
				if v := h.Get(name); v != "" {
					t.Errorf("%s %q reached the origin", name, v)
				}
			}
			if v := h.Get("X-Edge-Secret"); v != "" {
				t.Errorf("the secret header went upstream: %q", v)
			}
			if v := h.Get("X-Office"); v != "" {
				t.Errorf("the client_ip matcher believed the caller's header")
			}
			want := map[string]string{"X-Seen-Client": peer, "X-Seen-Source": "peer", "X-Seen-Via-Edge": "false"}
			for name, value := range want {
				if got := h.Get(name); got != value {
					t.Errorf("origin saw %s %q, want %q", name, got, value)
				}
			}
			entry := clientIPAccessLogEntry(t, c, req.URL.RequestURI())
			if entry.Request.ClientIP != peer || entry.ClientIP.Source != "peer" || entry.ClientIP.ViaEdge {
				t.Errorf("access log has request.client_ip %q and client_ip %+v, want the peer, not via the edge", entry.Request.ClientIP, entry.ClientIP)
			}
		}
	})
}

func TestClientIPUntrustedReject(t *testing.T) {
	origin := EchoOrigin(t)
	c := StartCaddy(t, `
http://{$HOST}:{$HTTP_PORT} {
	handle /edge/* {
		client_ip {
			trusted_proxies 127.0.0.0/8 ::1
			untrusted reject
		}
		reverse_proxy `+origin+`
	}
	handle {
		client_ip {
			trusted_proxies 192.0.2.0/24
			untrusted reject 451
		}
		reverse_proxy `+origin+`
	}
	handle_errors {
		respond "refused {err.status_code}: peer={http.client_ip.peer} via_edge={http.client_ip.via_edge}"
	}
}`)
	client := c.Client()

	// Loopback is not the edge here: refused with the configured status,
	// through handle_errors.
	req, _ := http.NewRequest(http.MethodGet, c.URL("/direct"), nil)
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	resp, body := Do(t, client, req)
	if resp.StatusCode != 451 || body != "refused 451: peer=127.0.0.1 via_edge=false" {
		t.Errorf("untrusted request: %d %q, want 451 from handle_errors", resp.StatusCode, body)
	}

	// Loopback is the edge here; without a chain it is not through it.
	req, _ = http.NewRequest(http.MethodGet, c.URL("/edge/no-chain"), nil)
	if resp, body := Do(t, client, req); resp.StatusCode != 403 || body != "refused 403: peer=127.0.0.1 via_edge=false" {
		t.Errorf("edge without a chain: %d %q, want the default 403", resp.StatusCode, body)
	}
	req, _ = http.NewRequest(http.MethodGet, c.URL("/edge/ok"), nil)
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	echo, _ := GetEcho(t, client, req)
	if xff := http.Header(echo.Headers).Get("X-Forwarded-For"); xff != "203.0.113.7, 127.0.0.1" {
		t.Errorf("trusted request: origin saw X-Forwarded-For %q", xff)
	}

	metrics := c.Metrics()
	for _, line := range []string{
		`caddy_client_ip_untrusted_total{action="reject",reason="untrusted_hop"} 1`,
		`caddy_client_ip_untrusted_total{action="reject",reason="short_chain"} 1`,
		`caddy_client_ip_requests_total{source="xff"} 1`,
		`caddy_client_ip_requests_total{source="peer"} 2`,
	} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("metrics lack %s:\n%s", line, grepLines(metrics, "caddy_client_ip"))
		}
	}
}

func TestClientIPReloadRefusesBadConfig(t *testing.T) {
	origin := EchoOrigin(t)
	good := `
http://{$HOST}:{$HTTP_PORT} {
	client_ip {
		trusted_proxies 127.0.0.1
	}
	request_header X-Seen-Client {client_ip}
	reverse_proxy ` + origin + `
}`
	c := StartCaddy(t, good)
	stillServing := func(t *testing.T) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, c.URL("/after"), nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		echo, _ := GetEcho(t, c.Client(), req)
		if got := http.Header(echo.Headers).Get("X-Seen-Client"); got != "203.0.113.7" {
			t.Fatalf("old config not serving: origin saw client %q", got)
		}
	}
	stillServing(t)

	for _, tc := range []struct{ name, option, want string }{
		{"hops 0", "hops 0", "hops 0: must be 1..16 (number of proxy layers in front of Caddy)"},
		{"unset env secret", "secret X-Edge-Secret {env.EDGEKIT_TEST_NEVER_SET}",
			`client_ip: secret X-Edge-Secret: placeholder {env.EDGEKIT_TEST_NEVER_SET} is empty or unset: set the environment variable EDGEKIT_TEST_NEVER_SET before Caddy starts`},
		{"everything trusted", "trusted_proxies 0.0.0.0/0", "client_ip: trusted_proxies covers every IPv4 address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(good, "trusted_proxies 127.0.0.1", "trusted_proxies 127.0.0.1\n\t\t"+tc.option, 1)
			status, body := c.Load(bad)
			var answer struct{ Error string }
			if json.Unmarshal([]byte(body), &answer) == nil && answer.Error != "" {
				body = answer.Error // unescaped
			}
			if status == http.StatusOK || !strings.Contains(body, tc.want) {
				t.Errorf("reload with %q: %d %q, want a refusal saying %q", tc.option, status, body, tc.want)
			}
			stillServing(t)
		})
	}

	// The same refusal for JSON, where Validate (not the Caddyfile parser)
	// catches it.
	resp, err := http.Get(c.AdminURL("/config/"))
	if err != nil {
		t.Fatal(err)
	}
	config, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /config/: status %d: %s", resp.StatusCode, config)
	}
	bad := strings.Replace(string(config), `"handler":"client_ip"`, `"handler":"client_ip","hops":0`, 1)
	if bad == string(config) {
		t.Fatalf("no client_ip handler in the running config: %s", config)
	}
	resp, err = http.Post(c.AdminURL("/load"), "application/json", strings.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(body), "client_ip: hops 0: must be 1..16") {
		t.Errorf("JSON reload with hops 0: %d %q", resp.StatusCode, body)
	}
	stillServing(t)
}

// clientIPOverH1AndH3 runs fn as a subtest over plain HTTP/1.1 and over
// HTTP/3, each with its own path under prefix.
func clientIPOverH1AndH3(t *testing.T, c *Caddy, prefix string, fn func(t *testing.T, client *http.Client, url, proto string)) {
	t.Run("h1", func(t *testing.T) { fn(t, c.Client(), c.URL(prefix+"-h1"), "HTTP/1.1") })
	t.Run("h3", func(t *testing.T) { fn(t, c.H3Client(), c.HTTPSURL(prefix+"-h3"), "HTTP/3.0") })
}

// clientIPAccessEntry is the part of an access log line these tests read.
type clientIPAccessEntry struct {
	Logger  string `json:"logger"`
	Request struct {
		ClientIP string `json:"client_ip"`
		URI      string `json:"uri"`
	} `json:"request"`
	ClientIP struct {
		Peer    string `json:"peer"`
		Source  string `json:"source"`
		ViaEdge bool   `json:"via_edge"`
	} `json:"client_ip"`
}

// clientIPAccessLogEntry waits for the access log line of the request to path.
func clientIPAccessLogEntry(t *testing.T, c *Caddy, path string) clientIPAccessEntry {
	t.Helper()
	var found clientIPAccessEntry
	ok := WaitFor(context.Background(), 10*time.Second, func() bool {
		for line := range strings.SplitSeq(c.Logs(), "\n") {
			var e clientIPAccessEntry
			if json.Unmarshal([]byte(line), &e) == nil && strings.HasPrefix(e.Logger, "http.log.access") && e.Request.URI == path {
				found = e
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("no access log line for %s in:\n%s", path, c.Logs())
	}
	return found
}

// TestClientIPHeaderAndForwardedModes: the edge writes the caller in
// CF-Connecting-IP or in RFC 7239 Forwarded; the origin gets an
// X-Forwarded-For of just that caller plus the peer, whatever the caller
// wrote there itself. Untrusted requests are let in and logged (observe).
func TestClientIPHeaderAndForwardedModes(t *testing.T) {
	origin := EchoOrigin(t)
	c := StartCaddy(t, `
http://{$HOST}:{$HTTP_PORT} {
	handle /cf/* {
		client_ip {
			trusted_proxies 127.0.0.1
			header CF-Connecting-IP
			untrusted observe
		}
		reverse_proxy `+origin+`
	}
	handle /fwd/* {
		client_ip {
			trusted_proxies 127.0.0.1
			forwarded
		}
		reverse_proxy `+origin+`
	}
}`)
	client := c.Client()
	for _, tc := range []struct{ path, header, value, want string }{
		{"/cf/ok", "CF-Connecting-IP", "[2001:db8::7]:5555", "2001:db8::7, 127.0.0.1"},
		{"/cf/list", "CF-Connecting-IP", "203.0.113.7, 6.6.6.6", "127.0.0.1"},
		{"/fwd/ok", "Forwarded", `for=6.6.6.6, for="203.0.113.7:4711";proto=https`, "203.0.113.7, 127.0.0.1"},
		{"/fwd/unknown", "Forwarded", "for=unknown", "127.0.0.1"},
	} {
		req, _ := http.NewRequest(http.MethodGet, c.URL(tc.path), nil)
		req.Header.Set("X-Forwarded-For", "6.6.6.6")
		req.Header.Set(tc.header, tc.value)
		echo, _ := GetEcho(t, client, req)
		if got := http.Header(echo.Headers).Get("X-Forwarded-For"); got != tc.want {
			t.Errorf("%s with %s %q: origin saw X-Forwarded-For %q, want %q", tc.path, tc.header, tc.value, got, tc.want)
		}
	}

	// observe: the untrusted /cf/list request got through above, and is in
	// the log with its reason.
	found := WaitFor(context.Background(), 10*time.Second, func() bool {
		for line := range strings.SplitSeq(c.Logs(), "\n") {
			if strings.Contains(line, `"logger":"http.handlers.client_ip"`) && strings.Contains(line, "request did not come through the edge") &&
				strings.Contains(line, `"reason":"invalid_address"`) && strings.Contains(line, `"uri":"/cf/list"`) {
				return true
			}
		}
		return false
	})
	if !found {
		t.Errorf("no observe log line for /cf/list:\n%s", grepLines(c.Logs(), "client_ip"))
	}
	if m := c.Metrics(); !strings.Contains(m, `caddy_client_ip_untrusted_total{action="observe",reason="invalid_address"} 1`+"\n") {
		t.Errorf("observe not counted:\n%s", grepLines(m, "caddy_client_ip"))
	}
}
