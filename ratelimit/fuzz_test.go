package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// FuzzParseRate: any accepted rate is positive, at most one request per
// microsecond, formats back to itself, and gives GCRA parameters and a
// RateLimit-Policy that make sense.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"100/1m", "10/s", "5/500ms", "1000/1d", "1/h", "3/1h30m", "0/s", "-1/s", "1/0s", "1/", "/s", "10", "1e3/s", "1000000/1s", "99999999999999999999/s", "1/-5s", "1/1ns", "10/minute", "1/1mins", "1/1.5µs", "5/2h3x", "1/1μs", "2/1h30"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseRate(s)
		if err != nil {
			if r != (rate{}) {
				t.Fatalf("%q: error %v with a value %+v", s, err, r)
			}
			return
		}
		if r.n < 1 || r.n > maxRequests || r.period <= 0 {
			t.Fatalf("%q accepted as %+v", s, r)
		}
		if iv := r.interval(); iv < int64(time.Microsecond) {
			t.Fatalf("%q: interval %dns below 1µs", s, iv)
		}
		again, err := parseRate(r.String())
		if err != nil || again != r {
			t.Fatalf("%q -> %q -> %+v, %v", s, r.String(), again, err)
		}
		q, w := r.policyWindow()
		if w < 1 || q < 0 || time.Duration(w)*time.Second < r.period {
			t.Fatalf("%q: policy q=%d w=%d", s, q, w)
		}
	})
}

// FuzzParseKeyTemplate: an accepted template has balanced, non-empty
// placeholders; expanding it never panics; a rejected one says why.
func FuzzParseKeyTemplate(f *testing.F) {
	for _, s := range []string{"{client_ip}", "{http.vars.client_ip}", "{http.request.header.X-Api-Key}", "{client_ip}-{http.request.host}", "static", `\{literal\}`, "{", "}", "{}", "{{a}}", "{a", "a}", "", " ", `{a\}b}`, "{http.request.headr.X}", "{http.request.duration}", "{http.request.uuid}", "{http.request.body}", "{http.request.tls.client.fingerprint}", "{http.response.header.X}", "{err.message}", "k:{http.request.host.labels.x}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := parseKeyTemplate(s)
		if err != nil {
			if !strings.Contains(err.Error(), "key") {
				t.Fatalf("%q: error does not say it is about the key: %v", s, err)
			}
			return
		}
		depth := 0
		for i := 0; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '{':
				depth++
			case '}':
				depth--
			}
			if depth < 0 || depth > 1 {
				t.Fatalf("%q accepted with unbalanced braces", s)
			}
		}
		if depth != 0 {
			t.Fatalf("%q accepted with an unclosed placeholder", s)
		}
		k.v4bits, k.v6bits = 32, 64
		rk := k.fromString(s)
		if rk.isAddr == (rk.text != "") && s != "" {
			t.Fatalf("%q: key is both or neither address and text: %+v", s, rk)
		}
		_ = rk.hash()
		if !k.clientIP {
			// The one-placeholder fast path expands as ReplaceAll does.
			r := httptest.NewRequest("GET", "http://example.com/", nil)
			r.Header.Set("X-Api-Key", "2001:db8::1")
			repl := caddyhttp.NewTestReplacer(r)
			if got, want := first(k.key(r, varsOf(r))), k.fromString(repl.ReplaceAll(s, "")); got != want {
				t.Fatalf("%q: key %+v, ReplaceAll gives %+v", s, got, want)
			}
		}
		// A text key's Redis name is its hash, never the text a caller
		// sent (it may be a credential); an address prefix is itself.
		name := string(rk.appendRedisName(nil))
		if rk.isAddr {
			if name != rk.addr.String() {
				t.Fatalf("%q: Redis name %q of address key %s", s, name, rk.addr)
			}
		} else if sum := sha256.Sum256([]byte(rk.text)); name != "#"+hex.EncodeToString(sum[:]) {
			t.Fatalf("%q: Redis name %q, want # and the SHA-256 of the key", s, name)
		}
	})
}

// FuzzAcceptsProblem: any Accept value is read without panicking; one that
// opts in names the media type; naming it (with no weight) after any value
// opts in, and a single media range with weight 0 never does.
func FuzzAcceptsProblem(f *testing.F) {
	for _, s := range []string{"application/problem+json", "text/html, application/problem+json;q=0.5", "application/problem+json;q=0", "*/*", "application/json", "", ";;,,", "application/problem+json;q=", "APPLICATION/PROBLEM+JSON ; Q=1.000", "a;q=0x1p0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := acceptsProblem([]string{s})
		if got && !strings.Contains(strings.ToLower(s), problemMedia) {
			t.Fatalf("%q accepted without naming %s", s, problemMedia)
		}
		if !acceptsProblem([]string{s + "," + problemMedia}) {
			t.Fatalf("%q followed by %s not accepted", s, problemMedia)
		}
		if !strings.ContainsAny(s, ",;") && acceptsProblem([]string{s + ";q=0"}) {
			t.Fatalf("%q;q=0 accepted", s)
		}
	})
}
