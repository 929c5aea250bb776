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

// TestClientIPSignedAssertionFromLogsIsSpent: the two places a real Caddy
// writes the PoP's assertion to its logs, the PoP's reverse_proxy line for
// an upstream that broke off its response ("aborting with incomplete
// response", with the request headers) and the origin's access log (the
// headers as received), each hold an assertion already used. Presented
// again at the origin, on its own request and well within max_age, each is
// refused as a replay.
func TestClientIPSignedAssertionFromLogsIsSpent(t *testing.T) {
	// The backend breaks off its response when asked to (X-Break: 1, which
	// the assertion does not cover); otherwise it echoes.
	backend := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Break") == "" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(Echo{URI: r.RequestURI, Headers: r.Header})
			return
		}
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "partial")
		http.NewResponseController(w).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	originSite := strings.Replace(signedOriginSite(backend, "\t\t\tkey k1 {env.EDGE_KEY_K1}", "30s"),
		"http://:{$HTTP_PORT} {", "http://:{$HTTP_PORT} {\n\tlog", 1)
	origin := StartCaddyWith(t, Options{Env: signedEnv}, originSite)
	pop := StartCaddyWith(t, Options{Env: signedEnv}, signedPoPSite(backend, origin.HTTPAddr(), "k1"))
	pop.WaitHTTPS(t)
	const phoneIP = "127.0.0.9"
	phone := signedPhone(t, pop, phoneIP, false)
	host := pop.HTTPSURL("")[len("https://"):] // the PoP keeps the phone's Host

	// replay presents assertion at the origin on its own request.
	replay := func(t *testing.T, target, assertion string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, origin.URL(target), nil)
		req.Host = host
		req.Header.Set("X-Edge-Assertion", assertion)
		resp, body := Do(t, origin.Client(), req)
		return resp.StatusCode, body
	}
	// logged waits for a JSON log line of c that has msg and uri, and
	// returns its request's X-Edge-Assertion.
	logged := func(t *testing.T, c *Caddy, logger, msg, uri string) string {
		t.Helper()
		var found string
		WaitFor(context.Background(), 10*time.Second, func() bool {
			for line := range strings.SplitSeq(c.Logs(), "\n") {
				var e struct {
					Logger  string `json:"logger"`
					Msg     string `json:"msg"`
					Request struct {
						URI     string              `json:"uri"`
						Headers map[string][]string `json:"headers"`
					} `json:"request"`
				}
				if json.Unmarshal([]byte(line), &e) != nil || !strings.HasPrefix(e.Logger, logger) || e.Msg != msg || e.Request.URI != uri {
					continue
				}
				if v := e.Request.Headers["X-Edge-Assertion"]; len(v) == 1 {
					found = v[0]
					return true
				}
			}
			return false
		})
		if found == "" {
			t.Fatalf("no %s line %q for %s with an assertion in:\n%s", logger, msg, uri, c.Logs())
		}
		if !strings.HasPrefix(found, "v1 ip="+phoneIP+" t=") {
			t.Fatalf("logged assertion %q is not the PoP's for %s", found, phoneIP)
		}
		return found
	}

	t.Run("PoP upstream error log", func(t *testing.T) {
		const target = "/break/x?id=1"
		req, _ := http.NewRequest(http.MethodGet, pop.HTTPSURL(target), nil)
		req.Header.Set("X-Break", "1")
		if resp, err := phone.Do(req); err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil {
				t.Fatalf("the response was not broken off")
			}
		}
		assertion := logged(t, pop, "http.handlers.reverse_proxy", "aborting with incomplete response", target)
		if status, body := replay(t, target, assertion); status != http.StatusForbidden || body != "refused 403 assertion_replayed" {
			t.Errorf("the PoP's logged assertion replayed at the origin: %d %.300s, want 403 for assertion_replayed", status, body)
		}
	})

	t.Run("origin access log", func(t *testing.T) {
		const target = "/logged/x?id=2"
		req, _ := http.NewRequest(http.MethodGet, pop.HTTPSURL(target), nil)
		echo, _ := GetEcho(t, phone, req)
		if got := http.Header(echo.Headers).Get("X-Seen-Client"); got != phoneIP {
			t.Fatalf("origin saw client %q, want %s", got, phoneIP)
		}
		assertion := logged(t, origin, "http.log.access", "handled request", target)
		if status, body := replay(t, target, assertion); status != http.StatusForbidden || body != "refused 403 assertion_replayed" {
			t.Errorf("the origin's logged assertion replayed: %d %.300s, want 403 for assertion_replayed", status, body)
		}
	})

	// Control: an assertion nobody used yet, computed as the PoP would, is
	// accepted; so the refusals above are for the replay alone.
	target := "/fresh/x"
	if status, body := replay(t, target, assertionFor(signedKey1, "k1", phoneIP, time.Now(), "GET", host, target)); status != http.StatusOK || !strings.Contains(body, `"X-Seen-Client":["`+phoneIP+`"]`) {
		t.Errorf("a fresh assertion: %d %.300s, want accepted", status, body)
	}
	if m := origin.Metrics(); !strings.Contains(m, `caddy_client_ip_untrusted_total{action="reject",reason="assertion_replayed"} 2`+"\n") {
		t.Errorf("replays not counted:\n%s", grepLines(m, "caddy_client_ip_untrusted_total"))
	}
}
