package clientip

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const (
	testKey1 = "k1-secret-0123456789abcdef0123456789"
	testKey2 = "k2-secret-0123456789abcdef0123456789"
	popPeer  = "10.0.0.1:4711"
	phone    = "203.0.113.7"
)

var testEpoch = time.Unix(1764590000, 0)

// popHandler signs with key id/secret; nothing is in front of it.
func popHandler(t testing.TB, id, secret string) *Handler {
	t.Helper()
	h := provision(t, fmt.Sprintf(`{"sign":{"key":{"id":%q,"secret":%q}}}`, id, secret))
	h.signer.now = func() time.Time { return testEpoch }
	return h
}

// originHandler trusts 10/8 and verifies with the given id, secret pairs,
// rejecting what is not valid; its clock reads testEpoch+at.
func originHandler(t testing.TB, at time.Duration, idSecret ...string) *Handler {
	t.Helper()
	var keys []string
	for i := 0; i+1 < len(idSecret); i += 2 {
		keys = append(keys, fmt.Sprintf(`{"id":%q,"secret":%q}`, idSecret[i], idSecret[i+1]))
	}
	h := provision(t, `{"trusted_proxies":["10.0.0.0/8"],"untrusted":"reject","verify":{"keys":[`+strings.Join(keys, ",")+`]}}`)
	h.resolver.verify.now = func() time.Time { return testEpoch.Add(at) }
	return h
}

func newRequest(method, target, remoteAddr string, header ...string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = remoteAddr
	r.Header = hdr(header...)
	return r
}

// signAt has the PoP sign a request from the phone and returns the header.
func signAt(t *testing.T, pop *Handler, method, target string) string {
	t.Helper()
	s, err := serveRequest(t, pop, newRequest(method, target, phone+":5555"))
	if err != nil {
		t.Fatal(err)
	}
	if s.repl["http.client_ip.reason"] != "peer" || s.repl["http.client_ip.source"] != "peer" {
		t.Errorf("PoP with nothing in front: reason %q source %q, want peer peer", s.repl["http.client_ip.reason"], s.repl["http.client_ip.source"])
	}
	v := s.header.Values(defaultAssertionHeader)
	if len(v) != 1 {
		t.Fatalf("PoP wrote %q, want one assertion", v)
	}
	return v[0]
}

// refusedFor checks that the origin refused with 403 for reason why.
func refusedFor(t *testing.T, s seen, err error, why string) {
	t.Helper()
	var he caddyhttp.HandlerError
	if err == nil || !errors.As(err, &he) || he.StatusCode != http.StatusForbidden || !strings.Contains(err.Error(), "("+why+")") {
		t.Errorf("got error %v (next called %v), want a 403 for %s", err, s.called, why)
	}
}

func TestAssertionRoundTrip(t *testing.T) {
	pop := popHandler(t, "k1", testKey1)
	value := signAt(t, pop, "POST", "http://shop.example/cart/add?item=42&n=1")
	if !strings.HasPrefix(value, "v1 ip=203.0.113.7 t=1764590000 kid=k1 sig=") || len(value) != len("v1 ip=203.0.113.7 t=1764590000 kid=k1 sig=")+sigChars {
		t.Fatalf("assertion %q", value)
	}
	origin := originHandler(t, 3*time.Second, "k1", testKey1)
	r := newRequest("POST", "http://shop.example/cart/add?item=42&n=1", popPeer,
		"X-Edge-Assertion", value, "X-Forwarded-For", "6.6.6.6, 203.0.113.7")
	s, err := serveRequest(t, origin, r)
	if err != nil {
		t.Fatal(err)
	}
	if s.clientIP != phone || s.trusted != true {
		t.Errorf("vars client_ip=%v trusted_proxy=%v, want %s true", s.clientIP, s.trusted, phone)
	}
	for key, want := range map[string]string{"http.client_ip.source": "signed", "http.client_ip.reason": "signed", "http.client_ip.via_edge": "true", "http.client_ip.peer": "10.0.0.1"} {
		if s.repl[key] != want {
			t.Errorf("{%s} = %q, want %q", key, s.repl[key], want)
		}
	}
	if v := s.header.Values("X-Edge-Assertion"); v != nil {
		t.Errorf("the assertion went on: %q", v)
	}
	// The unsigned chain counts for nothing: X-Forwarded-For becomes the
	// signed client, reverse_proxy appends the peer.
	if got := s.header.Values("X-Forwarded-For"); len(got) != 1 || got[0] != phone {
		t.Errorf("X-Forwarded-For %q, want [%s]", got, phone)
	}

	// IPv6 callers too.
	v6 := "[2001:db8::7]:5555"
	s, err = serveRequest(t, pop, newRequest("GET", "http://shop.example/", v6))
	if err != nil {
		t.Fatal(err)
	}
	s, err = serveRequest(t, origin, newRequest("GET", "http://shop.example/", popPeer, "X-Edge-Assertion", s.header.Get("X-Edge-Assertion")))
	if err != nil || s.clientIP != "2001:db8::7" {
		t.Errorf("IPv6 caller: client %v, err %v", s.clientIP, err)
	}
}

// Every way an assertion can fail, each with its own reason, all counted.
func TestAssertionRefusals(t *testing.T) {
	pop := popHandler(t, "k1", testKey1)
	const target = "http://shop.example/cart/add?item=42"
	good := signAt(t, pop, "POST", target)
	other := popHandler(t, "k9", "k9-secret-0123456789abcdef0123456789")
	unknownKey := signAt(t, other, "POST", target)
	sameIDOtherKey := signAt(t, popHandler(t, "k1", testKey2), "POST", target)

	for _, tc := range []struct {
		name, method, target, remote string
		at                           time.Duration
		header                       []string
		why                          string
	}{
		{"missing", "POST", target, popPeer, 0, nil, "assertion_missing"},
		{"empty", "POST", target, popPeer, 0, []string{"X-Edge-Assertion", ""}, "assertion_malformed"},
		{"two lines", "POST", target, popPeer, 0, []string{"X-Edge-Assertion", good, "X-Edge-Assertion", good}, "assertion_malformed"},
		{"garbage", "POST", target, popPeer, 0, []string{"X-Edge-Assertion", "trust me"}, "assertion_malformed"},
		{"signature cut", "POST", target, popPeer, 0, []string{"X-Edge-Assertion", good[:len(good)-1]}, "assertion_malformed"},
		{"address changed", "POST", target, popPeer, 0, []string{"X-Edge-Assertion", strings.Replace(good, "ip=203.0.113.7", "ip=203.0.113.8", 1)}, "assertion_bad_signature"},
		{"time changed", "POST", target, popPeer, 0, []string{"X-Edge-Assertion", strings.Replace(good, "t=1764590000", "t=1764590001", 1)}, "assertion_bad_signature"},
		{"signature changed", "POST", target, popPeer, 0, []string{"X-Edge-Assertion", flipLast(good)}, "assertion_bad_signature"},
		{"other path", "POST", "http://shop.example/cart/remove?item=42", popPeer, 0, []string{"X-Edge-Assertion", good}, "assertion_bad_signature"},
		{"other query", "POST", "http://shop.example/cart/add?item=43", popPeer, 0, []string{"X-Edge-Assertion", good}, "assertion_bad_signature"},
		{"query dropped", "POST", "http://shop.example/cart/add", popPeer, 0, []string{"X-Edge-Assertion", good}, "assertion_bad_signature"},
		{"other method", "GET", target, popPeer, 0, []string{"X-Edge-Assertion", good}, "assertion_bad_signature"},
		{"other host", "POST", "http://evil.example/cart/add?item=42", popPeer, 0, []string{"X-Edge-Assertion", good}, "assertion_bad_signature"},
		{"same id, other key", "POST", target, popPeer, 0, []string{"X-Edge-Assertion", sameIDOtherKey}, "assertion_bad_signature"},
		{"unknown key", "POST", target, popPeer, 0, []string{"X-Edge-Assertion", unknownKey}, "assertion_unknown_key"},
		{"expired", "POST", target, popPeer, 30*time.Second + time.Nanosecond, []string{"X-Edge-Assertion", good}, "assertion_expired"},
		{"from the future", "POST", target, popPeer, -5*time.Second - time.Nanosecond, []string{"X-Edge-Assertion", good}, "assertion_future"},
		{"valid, but not from the PoP", "POST", target, "198.51.100.1:4711", 0, []string{"X-Edge-Assertion", good}, "untrusted_hop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			origin := originHandler(t, tc.at, "k1", testKey1)
			counter := metrics.untrusted.WithLabelValues(tc.why, "reject")
			before := testutil.ToFloat64(counter)
			s, err := serveRequest(t, origin, newRequest(tc.method, tc.target, tc.remote, tc.header...))
			refusedFor(t, s, err, tc.why)
			if got := testutil.ToFloat64(counter) - before; got != 1 {
				t.Errorf("untrusted_total{reason=%q} grew by %v, want 1", tc.why, got)
			}
		})
	}

	// The edges of the window are inside it (each with an assertion of its
	// own: the origins share the record of used ones).
	for _, at := range []time.Duration{30 * time.Second, -5 * time.Second} {
		origin := originHandler(t, at, "k1", testKey1)
		target := target + "&at=" + at.String()
		if _, err := serveRequest(t, origin, newRequest("POST", target, popPeer, "X-Edge-Assertion", signAt(t, pop, "POST", target))); err != nil {
			t.Errorf("checked %v after signing: %v, want accepted", at, err)
		}
	}
}

// flipLast changes the signature's last character to another valid one.
func flipLast(s string) string {
	last := s[len(s)-1]
	repl := byte('A')
	if last == 'A' {
		repl = 'B'
	}
	return s[:len(s)-1] + string(repl)
}

// Observe lets a bad assertion through with the reason in the placeholder,
// the peer as the client and the header gone.
func TestAssertionObserve(t *testing.T) {
	h := provision(t, `{"trusted_proxies":["10.0.0.0/8"],"untrusted":"observe","verify":{"keys":[{"id":"k1","secret":"`+testKey1+`"}]}}`)
	s, err := serveRequest(t, h, newRequest("GET", "http://shop.example/", popPeer, "X-Edge-Assertion", "v1 ip=6.6.6.6 t=1 kid=k1 sig="+strings.Repeat("A", sigChars)))
	if err != nil {
		t.Fatal(err)
	}
	if s.repl["http.client_ip.reason"] != "assertion_bad_signature" || s.clientIP != "10.0.0.1" || s.trusted != false {
		t.Errorf("reason %q client %v trusted %v, want assertion_bad_signature 10.0.0.1 false", s.repl["http.client_ip.reason"], s.clientIP, s.trusted)
	}
	if v := s.header.Values("X-Edge-Assertion"); v != nil {
		t.Errorf("a refused assertion went on: %q", v)
	}
}

// A caller's own assertion never passes the PoP: it is replaced by the
// PoP's, about the caller's real address.
func TestPoPReplacesCallersAssertion(t *testing.T) {
	pop := popHandler(t, "k1", testKey1)
	forged := "v1 ip=6.6.6.6 t=1764590000 kid=k1 sig=" + strings.Repeat("A", sigChars)
	s, err := serveRequest(t, pop, newRequest("GET", "http://shop.example/", phone+":5555",
		"X-Edge-Assertion", forged, "X-Edge-Assertion", forged))
	if err != nil {
		t.Fatal(err)
	}
	got := s.header.Values("X-Edge-Assertion")
	if len(got) != 1 || !strings.HasPrefix(got[0], "v1 ip=203.0.113.7 ") {
		t.Errorf("after the PoP: %q, want only its own assertion for %s", got, phone)
	}
}

// A tier in the middle verifies what the outer PoP signed and signs it anew
// for the next: the client passes through unchanged.
func TestAssertionMiddleTier(t *testing.T) {
	outer := signAt(t, popHandler(t, "k1", testKey1), "GET", "http://shop.example/x")
	mid := provision(t, `{"trusted_proxies":["10.0.0.0/8"],"untrusted":"reject",
		"verify":{"keys":[{"id":"k1","secret":"`+testKey1+`"}]},
		"sign":{"key":{"id":"k2","secret":"`+testKey2+`"}}}`)
	mid.resolver.verify.now = func() time.Time { return testEpoch }
	mid.signer.now = func() time.Time { return testEpoch }
	s, err := serveRequest(t, mid, newRequest("GET", "http://shop.example/x", popPeer, "X-Edge-Assertion", outer))
	if err != nil {
		t.Fatal(err)
	}
	inner := s.header.Get("X-Edge-Assertion")
	if !strings.HasPrefix(inner, "v1 ip=203.0.113.7 t=1764590000 kid=k2 ") {
		t.Fatalf("middle tier wrote %q", inner)
	}
	s, err = serveRequest(t, originHandler(t, 0, "k2", testKey2), newRequest("GET", "http://shop.example/x", popPeer, "X-Edge-Assertion", inner))
	if err != nil || s.clientIP != phone {
		t.Errorf("origin: client %v, err %v", s.clientIP, err)
	}
}

// Rotation in three steps: the origin accepts old and new, the PoP
// switches, the origin drops the old. No step refuses what the PoP signs.
func TestAssertionKeyRotation(t *testing.T) {
	const target = "http://shop.example/r"
	oldPoP, newPoP := popHandler(t, "k1", testKey1), popHandler(t, "k2", testKey2)
	for _, step := range []struct {
		name           string
		pop            *Handler
		originKeys     []string
		acceptOld      bool
		acceptNewToo   bool
		wantOldRefusal string
	}{
		{"before", oldPoP, []string{"k1", testKey1}, true, false, ""},
		{"1: origin accepts both", oldPoP, []string{"k1", testKey1, "k2", testKey2}, true, true, ""},
		{"2: PoP signs with the new", newPoP, []string{"k1", testKey1, "k2", testKey2}, true, true, ""},
		{"3: origin drops the old", newPoP, []string{"k2", testKey2}, false, true, "assertion_unknown_key"},
	} {
		t.Run(step.name, func(t *testing.T) {
			origin := originHandler(t, time.Second, step.originKeys...)
			// What the PoP signs now is always accepted.
			s, err := serveRequest(t, origin, newRequest("GET", target, popPeer, "X-Edge-Assertion", signAt(t, step.pop, "GET", target)))
			if err != nil || s.clientIP != phone {
				t.Errorf("current PoP's assertion: client %v, err %v", s.clientIP, err)
			}
			for _, k := range []struct {
				pop    *Handler
				accept bool
			}{{oldPoP, step.acceptOld}, {newPoP, step.acceptNewToo}} {
				// Another request than the one above: the PoP's clock stands
				// still, and an assertion is accepted once.
				target := target + "?by=" + k.pop.Sign.Key.ID
				s, err := serveRequest(t, origin, newRequest("GET", target, popPeer, "X-Edge-Assertion", signAt(t, k.pop, "GET", target)))
				if k.accept && err != nil {
					t.Errorf("key %s refused: %v", k.pop.Sign.Key.ID, err)
				}
				if !k.accept {
					refusedFor(t, s, err, "assertion_unknown_key")
				}
			}
		})
	}
}

// The signatures are compared with the constant-time function, whole.
func TestAssertionComparedInConstantTime(t *testing.T) {
	if reflect.ValueOf(macEqual).Pointer() != reflect.ValueOf(subtleCompare).Pointer() {
		t.Fatal("macEqual is not crypto/subtle.ConstantTimeCompare")
	}
	var calls int
	macEqual = func(x, y []byte) int {
		calls++
		if len(x) != sigChars || len(y) != sigChars {
			t.Errorf("compared %d and %d bytes, want both signatures whole (%d)", len(x), len(y), sigChars)
		}
		return subtleCompare(x, y)
	}
	defer func() { macEqual = subtleCompare }()
	good := signAt(t, popHandler(t, "k1", testKey1), "GET", "http://shop.example/")
	origin := originHandler(t, 0, "k1", testKey1)
	for _, value := range []string{good, flipLast(good)} {
		_, _ = serveRequest(t, origin, newRequest("GET", "http://shop.example/", popPeer, "X-Edge-Assertion", value))
	}
	if calls != 2 {
		t.Errorf("macEqual called %d times for 2 verifications", calls)
	}
}

func TestAssertionConfigRefusals(t *testing.T) {
	t.Setenv("CLIENTIP_TEST_SHORT_KEY", "0123456789abcdef0123456789abcde") // 31 bytes
	t.Setenv("CLIENTIP_TEST_KEY", testKey1)
	verify := func(extra string) string {
		return `{"trusted_proxies":["10.0.0.0/8"],"verify":{"keys":[{"id":"k1","secret":"` + testKey1 + `"}]` + extra + `}}`
	}
	for _, tc := range []struct{ config, want string }{
		{`{"sign":{"key":{"id":"k1","secret":"{env.CLIENTIP_TEST_SHORT_KEY}"}}}`, "sign key k1: 31 bytes, want at least 32"},
		{`{"sign":{"key":{"id":"k1","secret":"{env.CLIENTIP_TEST_SURELY_UNSET}"}}}`, "sign key k1: placeholder {env.CLIENTIP_TEST_SURELY_UNSET} is empty or unset: set the environment variable CLIENTIP_TEST_SURELY_UNSET"},
		{`{"sign":{"key":{"id":"k1","secret":""}}}`, "sign key k1: value is empty"},
		{`{"sign":{}}`, "sign: no key"},
		{`{"sign":{"key":{"id":"k 1","secret":"` + testKey1 + `"}}}`, `sign key "k 1": the id must be 1..32 characters`},
		{`{"sign":{"key":{"id":"k1","secret":"` + testKey1 + `"},"header":"X Bad"}}`, `sign header "X Bad": not a valid header name`},
		{`{"trusted_proxies":["10.0.0.0/8"],"verify":{}}`, "verify: no key"},
		{`{"trusted_proxies":["10.0.0.0/8"],"verify":{"keys":[{"id":"k1","secret":"` + testKey1 + `"},{"id":"k1","secret":"` + testKey2 + `"}]}}`, "verify key k1: given twice"},
		{`{"trusted_proxies":["10.0.0.0/8"],"verify":{"keys":[{"id":"k1","secret":"` + testKey1 + `"},{"id":"k2","secret":"{env.CLIENTIP_TEST_KEY}"}]}}`, "verify keys k1 and k2: the same key under two ids"},
		{`{"trusted_proxies":["10.0.0.0/8"],"verify":{"keys":[{"id":"k1","secret":"{env.CLIENTIP_TEST_SHORT_KEY}"}]}}`, "verify key k1: 31 bytes, want at least 32"},
		{`{"trusted_proxies":["10.0.0.0/8"],"verify":{"keys":[{"id":"","secret":"` + testKey1 + `"}]}}`, `verify key "": the id must be`},
		{verify(`,"max_age":0`), "verify max_age 0s: must be 2s..5m0s"},
		{verify(`,"max_age":"1s"`), "verify max_age 1s: must be 2s..5m0s"},
		{verify(`,"max_age":"5m1s"`), "verify max_age 5m1s: must be 2s..5m0s"},
		{verify(`,"max_age":"-3s"`), "verify max_age -3s: must be"},
		{verify(`,"replay_cache_size":1023`), "verify replay_cache_size 1023: must be 1024..16000000"},
		{verify(`,"replay_cache_size":16000001`), "verify replay_cache_size 16000001: must be 1024..16000000"},
		{verify(`,"replay_cache_size":-1`), "verify replay_cache_size -1: must be 1024..16000000"},
		{verify(`,"header":"Bad:Name"`), `verify header "Bad:Name": not a valid header name`},
		{`{"trusted_proxies":["10.0.0.0/8"],"hops":2,"verify":{"keys":[{"id":"k1","secret":"` + testKey1 + `"}]}}`, "verify takes the client from the signed assertion"},
		{`{"trusted_proxies":["10.0.0.0/8"],"forwarded":true,"verify":{"keys":[{"id":"k1","secret":"` + testKey1 + `"}]}}`, "verify takes the client from the signed assertion"},
	} {
		_, err := tryProvision(tc.config)
		if err == nil || !strings.HasPrefix(err.Error(), "client_ip: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got  %v\n want client_ip: ...%s...", tc.config, err, tc.want)
		}
	}
	// The bounds themselves are accepted; the signature alone may prove the
	// edge.
	for _, config := range []string{
		`{"verify":{"keys":[{"id":"k1","secret":"` + testKey1 + `"}],"max_age":"2s"}}`,
		verify(`,"max_age":"5m"`),
		`{"sign":{"key":{"id":"2026-12_a.b","secret":"{env.CLIENTIP_TEST_KEY}"}}}`,
	} {
		if _, err := tryProvision(config); err != nil {
			t.Errorf("%s: %v", config, err)
		}
	}
}

// Verification allocates nothing, whether it accepts or refuses.
func TestVerifyDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	good := signAt(t, popHandler(t, "k1", testKey1), "GET", "http://shop.example/a/b?c=d")
	origin := originHandler(t, 0, "k1", testKey1, "k2", testKey2)
	for _, value := range []string{good, flipLast(good), strings.Replace(good, "kid=k1", "kid=k3", 1)} {
		r := newRequest("GET", "http://shop.example/a/b?c=d", popPeer, "X-Edge-Assertion", value)
		want := origin.resolver.resolveRequest(r)
		if n := testing.AllocsPerRun(100, func() { origin.resolver.resolveRequest(r) }); n != 0 {
			t.Errorf("%s: %v allocations per verification, want 0", want.reason, n)
		}
	}
}

var subtleCompare = subtle.ConstantTimeCompare

// {http.client_ip.reason} says why, for every way of resolving.
func TestReasonPlaceholder(t *testing.T) {
	for _, tc := range []struct{ config, remote, want string }{
		{`{"trusted_proxies":["10.0.0.0/8"]}`, popPeer, "xff"},
		{`{"trusted_proxies":["10.0.0.0/8"],"forwarded":true}`, popPeer, "forwarded"},
		{`{"trusted_proxies":["10.0.0.0/8"],"header":"X-Client"}`, popPeer, "header"},
		{`{"trusted_proxies":["10.0.0.0/8"]}`, "198.51.100.1:4711", "untrusted_hop"},
		{`{"trusted_proxies":["10.0.0.0/8"],"header":"X-Missing"}`, popPeer, "invalid_address"},
		{`{"secret":{"header":"X-Edge-Secret","value":"abc"}}`, popPeer, "secret"},
		{`{"sign":{"key":{"id":"k1","secret":"` + testKey1 + `"}}}`, "198.51.100.1:4711", "peer"},
	} {
		s, err := serveRequest(t, provision(t, tc.config), newRequest("GET", "http://shop.example/", tc.remote,
			"X-Forwarded-For", phone, "Forwarded", "for="+phone, "X-Client", phone))
		if err != nil {
			t.Fatal(err)
		}
		if got := s.repl["http.client_ip.reason"]; got != tc.want {
			t.Errorf("%s from %s: reason %q, want %q", tc.config, tc.remote, got, tc.want)
		}
	}
}

// TestSignBehindSourceIsNotDirect: a PoP that signs and learns its CDN's
// ranges from a source has something in front of it: it signs the client
// the CDN vouches for, never the CDN's own address.
func TestSignBehindSourceIsNotDirect(t *testing.T) {
	h := provision(t, fmt.Sprintf(`{"trusted_proxies_source":{"source":"static","ranges":["10.0.0.0/8"]},"sign":{"key":{"id":"k1","secret":%q}}}`, testKey1))
	if h.resolver.direct {
		t.Fatal("direct mode: the source's ranges would never be read")
	}
	if res := h.resolver.resolve(popPeer, hdr("X-Forwarded-For", phone)); res.clientText != phone || res.source != sourceXFF {
		t.Fatalf("client %q from %v, want %s from xff", res.clientText, res.source, phone)
	}
}
