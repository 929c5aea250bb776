package substitute

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// secretRule redacts what the origin must never let through.
var secretRule = []Rule{{Find: "sk_live_secret", Replace: "[redacted]"}}

const (
	cleanBody  = "<p>Bonjour</p>"
	secretBody = "<p>Hello, your token is sk_live_secret</p>"
	redacted   = "<p>Hello, your token is [redacted]</p>"
)

// TestMemoKeysOnVary: an origin that sends one strong ETag for the variants
// it declares in Vary: Accept-Language. A French request, whose body no rule
// matches, must not make the English body (which a rule redacts) stream
// unscanned: the Vary-listed request fields are part of the memo's key.
func TestMemoKeysOnVary(t *testing.T) {
	h := provision(t, &Handler{Rules: secretRule})
	next := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Vary", "Accept-Language")
		w.Header().Set("Etag", `"one-etag-for-every-language"`)
		if strings.HasPrefix(r.Header.Get("Accept-Language"), "fr") {
			_, _ = w.Write([]byte(cleanBody))
			return
		}
		_, _ = w.Write([]byte(secretBody))
	}
	get := func(lang string) string {
		r := request("GET", "/page")
		r.Header.Set("Accept-Language", lang)
		return serve(t, h, r, next).Body.String()
	}
	hits := testutil.ToFloat64(metrics.memoHits)
	if got := get("fr, en;q=0.5"); got != cleanBody {
		t.Fatalf("French: %q", got)
	}
	// The same variant, written with other spaces, is the same entry.
	if got := get("fr,en;q=0.5"); got != cleanBody {
		t.Fatalf("French again: %q", got)
	}
	if n := testutil.ToFloat64(metrics.memoHits); n != hits+1 {
		t.Errorf("memo hits %v after the same variant came back, want %v", n, hits+1)
	}
	for range 2 {
		if got := get("en-GB"); got != redacted {
			t.Fatalf("English after French: %q, want %q (the memo let it through unscanned)", got, redacted)
		}
	}
}

// TestMemoRemembersOnlyShareableResponses: the memo remembers only what a
// shared cache could give any caller. An attacker's request whose body
// matches no rule must not make the victim's body (same URL, same strong
// ETag, a body a rule redacts) stream unscanned when the response is
// per-user (Set-Cookie, private, no-store, Vary: *), or when the request's
// credentials (Cookie, Authorization) or Vary: Cookie select the body.
func TestMemoRemembersOnlyShareableResponses(t *testing.T) {
	cases := []struct {
		name     string
		respHdr  map[string]string
		attacker map[string]string // request headers; the victim's are victimHdr
		victim   map[string]string
		remember bool // whether the attacker's response may be remembered (for its key)
	}{
		{"Set-Cookie", map[string]string{"Set-Cookie": "session=1"}, nil, nil, false},
		{"private", map[string]string{"Cache-Control": "max-age=60, private"}, nil, nil, false},
		{"no-store", map[string]string{"Cache-Control": "no-store"}, nil, nil, false},
		{"Vary *", map[string]string{"Vary": "*"}, nil, nil, false},
		{"Vary Cookie", map[string]string{"Vary": "Accept-Encoding, cookie"},
			map[string]string{"Cookie": "user=attacker"}, map[string]string{"Cookie": "user=victim"}, true},
		{"Cookie", nil, map[string]string{"Cookie": "user=attacker"}, map[string]string{"Cookie": "user=victim"}, true},
		{"Authorization", nil, map[string]string{"Authorization": "Bearer attacker"}, map[string]string{"Authorization": "Bearer victim"}, true},
		{"no cookie, then cookie", nil, nil, map[string]string{"Cookie": "user=victim"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := provision(t, &Handler{Rules: secretRule})
			next := func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.Header().Set("Etag", `"same-etag-for-everyone"`)
				for k, v := range c.respHdr {
					w.Header().Set(k, v)
				}
				if r.Header.Get("X-Victim") != "" {
					_, _ = w.Write([]byte(secretBody))
					return
				}
				_, _ = w.Write([]byte(cleanBody))
			}
			send := func(hdr map[string]string, victim bool) string {
				r := request("GET", "/account")
				for k, v := range hdr {
					r.Header.Set(k, v)
				}
				if victim {
					r.Header.Set("X-Victim", "1")
				}
				return serve(t, h, r, next).Body.String()
			}
			for range 2 {
				if got := send(c.attacker, false); got != cleanBody {
					t.Fatalf("attacker: %q", got)
				}
			}
			if got := h.memo.len(); got != 0 && !c.remember || got != 1 && c.remember {
				t.Errorf("memo holds %d entries after the attacker's response, want remembered=%v", got, c.remember)
			}
			if got := send(c.victim, true); got != redacted {
				t.Errorf("victim after attacker: %q, want %q (streamed unscanned)", got, redacted)
			}
		})
	}
	// A shareable response to a request without credentials is remembered.
	h := provision(t, &Handler{Rules: secretRule})
	serve(t, h, request("GET", "/"), origin(200, map[string]string{
		"Content-Type": "text/html", "Etag": `"e"`, "Vary": "Accept-Encoding", "Cache-Control": "public, max-age=60",
	}, []byte(cleanBody), 64))
	if h.memo.len() != 1 {
		t.Errorf("memo holds %d entries after a shareable response, want 1", h.memo.len())
	}
}

// TestMemoKeyIsTheRawTarget: the memo's key is the request target as sent
// (escaped path, query) and the Host with its port: /a%2Fb and /a/b are
// different resources to an origin, as are two ports of one host.
func TestMemoKeyIsTheRawTarget(t *testing.T) {
	for _, c := range []struct {
		name                     string
		attacker, victim         string // targets
		attackerHost, victimHost string
	}{
		{"escaped slash", "/a%2Fb", "/a/b", "example.com", "example.com"},
		{"escaped letter", "/%61b", "/ab", "example.com", "example.com"},
		{"port", "/p", "/p", "example.com:8001", "example.com:8002"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := provision(t, &Handler{Rules: secretRule})
			next := func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.Header().Set("Etag", `"same"`)
				if r.Host == c.victimHost && r.URL.EscapedPath() == c.victim {
					_, _ = w.Write([]byte(secretBody))
					return
				}
				_, _ = w.Write([]byte(cleanBody))
			}
			send := func(target, host string) string {
				r := request("GET", target)
				r.Host = host
				return serve(t, h, r, next).Body.String()
			}
			if got := send(c.attacker, c.attackerHost); got != cleanBody {
				t.Fatalf("attacker %s%s: %q", c.attackerHost, c.attacker, got)
			}
			if got := send(c.victim, c.victimHost); got != redacted {
				t.Errorf("victim %s%s after attacker %s%s: %q, want %q (shared a memo entry)",
					c.victimHost, c.victim, c.attackerHost, c.attacker, got, redacted)
			}
		})
	}
}

// TestMemoDigestFraming: fields are framed, whatever their length against
// the hasher's buffer, so that no two lists of fields share a digest.
func TestMemoDigestFraming(t *testing.T) {
	m := newMemo(10)
	long := strings.Repeat("x", 3*memoHashBuf+7)
	pairs := [][2][]string{
		{{"ab", "c"}, {"a", "bc"}},
		{{"", "a"}, {"a", ""}},
		{{long + "a"}, {long + "b"}},
		{{long, "a"}, {long + "a"}},
		{{long[:memoHashBuf-40], "a"}, {long[:memoHashBuf-40] + "a"}},
	}
	for _, p := range pairs {
		if m.digest(p[0]...) == m.digest(p[1]...) {
			t.Errorf("%.20q and %.20q share a digest", p[0], p[1])
		}
	}
	if m.digest("a", long) != m.digest("a", long) {
		t.Error("digest is not deterministic")
	}
}

// TestMemoKeysOnStatus: an origin that answers 200 with a clean body and
// later 404 with the same strong ETag and a body a rule redacts. The status
// selects the response as much as the ETag does: the 200 must not make the
// 404 stream unscanned.
func TestMemoKeysOnStatus(t *testing.T) {
	h := provision(t, &Handler{Rules: secretRule})
	status := http.StatusOK
	next := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Etag", `"same-etag-every-status"`)
		w.WriteHeader(status)
		if status == http.StatusOK {
			_, _ = w.Write([]byte(cleanBody))
			return
		}
		_, _ = w.Write([]byte(secretBody))
	}
	for range 2 {
		if got := serve(t, h, request("GET", "/page"), next).Body.String(); got != cleanBody {
			t.Fatalf("200: %q", got)
		}
	}
	status = http.StatusNotFound
	if got := serve(t, h, request("GET", "/page"), next).Body.String(); got != redacted {
		t.Fatalf("404 after a clean 200 of the same ETag: %q, want %q (the memo let it through unscanned)", got, redacted)
	}
}
