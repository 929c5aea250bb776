package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

const (
	memoCleanBody  = "<p>Bonjour</p>"
	memoSecretBody = "<p>Hello, your token is sk_live_secret</p>"
	memoRedacted   = "<p>Hello, your token is [redacted]</p>"
)

// memoSharingCaddy is a Caddy whose substitute redacts sk_live_secret, in
// front of origin, on any Host.
func memoSharingCaddy(t *testing.T, origin http.HandlerFunc) *Caddy {
	t.Helper()
	return StartCaddy(t, fmt.Sprintf(`
http://:{$HTTP_PORT} {
	substitute {
		replace sk_live_secret [redacted]
	}
	reverse_proxy %s
}`, Origin(t, origin)))
}

// memoGet sends GET path to c with the Host host (the Caddy's own address
// when empty) and the headers in name, value pairs, and fails the test
// unless the answer is a 200.
func memoGet(t *testing.T, c *Caddy, client *http.Client, path, host string, header ...string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.URL(path), nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, body := Do(t, client, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s (Host %q): status %d: %q", path, host, resp.StatusCode, body)
	}
	return body
}

// TestSubstituteMemoHonoursVary: issue 26 item 1. The origin sends one
// strong ETag for the variants it declares in Vary: Accept-Language: the
// French body has nothing to redact, the English one a token a rule
// replaces. One French request must not make the English responses that
// follow stream unscanned, with the token in clear.
func TestSubstituteMemoHonoursVary(t *testing.T) {
	c := memoSharingCaddy(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Vary", "Accept-Language")
		w.Header().Set("ETag", `"one-etag-for-every-language"`)
		if strings.HasPrefix(r.Header.Get("Accept-Language"), "fr") {
			fmt.Fprint(w, memoCleanBody)
			return
		}
		fmt.Fprint(w, memoSecretBody)
	})
	client := c.Client()
	for range 2 {
		if got := memoGet(t, c, client, "/page", "", "Accept-Language", "fr-FR,fr;q=0.9"); got != memoCleanBody {
			t.Fatalf("French: %q", got)
		}
	}
	if hits := counterValue(t, c.Metrics(), "caddy_substitute_memo_hits_total"); hits != 1 {
		t.Errorf("memo hits %v after the French page twice, want 1 (the memo still serves a variant it knows)", hits)
	}
	for i := range 3 {
		if got := memoGet(t, c, client, "/page", "", "Accept-Language", "en-GB,en;q=0.9"); got != memoRedacted {
			t.Fatalf("English request %d after a French one: %q, want %q", i+1, got, memoRedacted)
		}
	}
}

// TestSubstituteMemoNeverSharesPerUserBodies: issue 26 item 1. The memo
// may only remember what a shared cache could give anyone: an attacker's
// request, whose body matches no rule, must not make the victim's body
// (same URL, same strong ETag, a token to redact) stream unscanned when the
// response is per-user (Set-Cookie, private, no-store, Vary: Cookie or *),
// or when the request's credentials select the body.
func TestSubstituteMemoNeverSharesPerUserBodies(t *testing.T) {
	respHeader := map[string][2]string{
		"/set-cookie":  {"Set-Cookie", "session=abc"},
		"/private":     {"Cache-Control", "private, max-age=60"},
		"/no-store":    {"Cache-Control", "no-store"},
		"/vary-star":   {"Vary", "*"},
		"/vary-cookie": {"Vary", "Cookie"},
		"/cookie":      {"X-Nothing", "per user without saying so"},
		"/auth":        {"X-Nothing", "per token without saying so"},
	}
	c := memoSharingCaddy(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("ETag", `"same-etag-for-everyone"`)
		if h, ok := respHeader[r.URL.Path]; ok {
			w.Header().Set(h[0], h[1])
		}
		if r.Header.Get("Cookie") == "user=victim" || r.Header.Get("Authorization") == "Bearer victim" {
			fmt.Fprint(w, memoSecretBody)
			return
		}
		fmt.Fprint(w, memoCleanBody)
	})
	client := c.Client()
	for path := range respHeader {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			attacker, victim := []string{"Cookie", "user=attacker"}, []string{"Cookie", "user=victim"}
			if path == "/auth" {
				attacker, victim = []string{"Authorization", "Bearer attacker"}, []string{"Authorization", "Bearer victim"}
			}
			for range 2 {
				if got := memoGet(t, c, client, path, "", attacker...); got != memoCleanBody {
					t.Fatalf("attacker: %q", got)
				}
			}
			if got := memoGet(t, c, client, path, "", victim...); got != memoRedacted {
				t.Errorf("victim after attacker: %q, want %q (streamed unscanned)", got, memoRedacted)
			}
		})
	}
	if n := counterValue(t, c.Metrics(), "caddy_substitute_memo_ineligible_total"); n != 3*4 {
		t.Errorf("memo_ineligible_total %v, want 12 (3 requests to each of set-cookie, private, no-store, vary-star)", n)
	}
}

// TestSubstituteMemoKeyIsTheRawTarget: found in reading for issue 26. The
// memo keyed on the decoded path and the Host without its port: /a%2Fb and
// /a/b, which an origin may tell apart, shared an entry, as did two ports
// of one host name.
func TestSubstituteMemoKeyIsTheRawTarget(t *testing.T) {
	c := memoSharingCaddy(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("ETag", `"same"`)
		if r.URL.EscapedPath() == "/a/b" && (r.Host == "site.test:8002" || r.Host == "site.test") {
			fmt.Fprint(w, memoSecretBody)
			return
		}
		fmt.Fprint(w, memoCleanBody)
	})
	client := c.Client()
	for _, step := range []struct {
		path, host, want string
	}{
		{"/a%2Fb", "site.test", memoCleanBody},
		{"/a/b", "site.test", memoRedacted},
		{"/a/b", "site.test:8001", memoCleanBody},
		{"/a/b", "site.test:8002", memoRedacted},
	} {
		if got := memoGet(t, c, client, step.path, step.host); got != step.want {
			t.Errorf("GET %s (Host %s): %q, want %q", step.path, step.host, got, step.want)
		}
	}
}
