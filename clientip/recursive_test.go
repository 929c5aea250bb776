package clientip

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
)

// The deployment: a CDN (127.0.0.2) in front of a load balancer of
// variable depth (10/8). hops 1 answers the balancer and hops 2 refuses
// requests that skip it; recursive skips every trusted address.
const recursiveConfig = `{"trusted_proxies":["10.0.0.0/8","127.0.0.2/32","2001:db8:e::/48"],"recursive":true}`

func TestRecursiveSkipsEveryTrustedAddress(t *testing.T) {
	const cdn = "127.0.0.2:4711"
	runResolveCases(t, recursiveConfig, []resolveCase{
		{"through the balancer", edgePeer, []string{"X-Forwarded-For", "203.0.113.7, 127.0.0.2"}, callerIP, sourceXFF, 0},
		{"issue: CDN then balancer", edgePeer, []string{"X-Forwarded-For", "203.0.113.7, 10.1.1.1"}, callerIP, sourceXFF, 0},
		{"straight from the CDN", cdn, []string{"X-Forwarded-For", callerIP}, callerIP, sourceXFF, 0},
		{"three layers", edgePeer, []string{"X-Forwarded-For", "198.51.100.9, 203.0.113.7, 10.3.3.3, 127.0.0.2, 10.1.1.1"}, callerIP, sourceXFF, 0},
		// Spoofed trusted addresses the caller wrote lie left of the
		// caller's own address, which the edge appended: never reached.
		{"caller spoofs trusted entries", edgePeer, []string{"X-Forwarded-For", "10.9.9.9, 127.0.0.2, 203.0.113.7, 10.1.1.1"}, callerIP, sourceXFF, 0},
		{"caller spoofs an IPv4-mapped trusted entry", edgePeer, []string{"X-Forwarded-For", "::ffff:10.9.9.9, 203.0.113.7"}, callerIP, sourceXFF, 0},
		{"IPv4-mapped trusted hop is skipped", edgePeer, []string{"X-Forwarded-For", "203.0.113.7, ::ffff:10.1.1.1, [::ffff:127.0.0.2]:80"}, callerIP, sourceXFF, 0},
		{"IPv4-mapped client is unmapped", edgePeer, []string{"X-Forwarded-For", "::ffff:203.0.113.7, 10.1.1.1"}, callerIP, sourceXFF, 0},
		{"IPv4-mapped peer", "[::ffff:10.0.0.1]:4711", []string{"X-Forwarded-For", callerIP}, callerIP, sourceXFF, 0},
		{"IPv6 with ports", edgePeer, []string{"X-Forwarded-For", "[2001:db8::7]:443, [2001:db8:e::1]:80, 10.2.2.2:8080"}, "2001:db8::7", sourceXFF, 0},
		{"IPv6 trusted peer", "[2001:db8:e::9]:443", []string{"X-Forwarded-For", "2001:db8::7"}, "2001:db8::7", sourceXFF, 0},
		{"empty members and whitespace", edgePeer, []string{"X-Forwarded-For", "\t203.0.113.7 , , ,10.1.1.1 ,"}, callerIP, sourceXFF, 0},
		{"across header lines", edgePeer, []string{"X-Forwarded-For", "6.6.6.6, 203.0.113.7", "X-Forwarded-For", "10.2.2.2", "X-Forwarded-For", "10.1.1.1"}, callerIP, sourceXFF, 0},
		{"client alone on its line", edgePeer, []string{"X-Forwarded-For", "203.0.113.7", "X-Forwarded-For", "10.1.1.1"}, callerIP, sourceXFF, 0},
		{"garbage left of the client is the caller's", edgePeer, []string{"X-Forwarded-For", "garbage, unknown, 203.0.113.7, 10.1.1.1"}, callerIP, sourceXFF, 0},

		{"peer not trusted", strangers, []string{"X-Forwarded-For", "203.0.113.7, 10.1.1.1"}, "198.51.100.1", sourcePeer, reasonUntrustedHop},
		{"no chain", edgePeer, nil, "10.0.0.1", sourcePeer, reasonShortChain},
		{"every member trusted", edgePeer, []string{"X-Forwarded-For", "10.1.1.1, 127.0.0.2"}, "10.0.0.1", sourcePeer, reasonShortChain},
		{"only empty members", edgePeer, []string{"X-Forwarded-For", " , ,"}, "10.0.0.1", sourcePeer, reasonShortChain},
		// Fail closed: what cannot be read before the client is never
		// skipped, so no caller can hide behind garbage.
		{"garbage in the trusted part", edgePeer, []string{"X-Forwarded-For", "203.0.113.7, garbage, 10.1.1.1"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"unknown in the trusted part", edgePeer, []string{"X-Forwarded-For", "203.0.113.7, unknown"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"zone in the trusted part", edgePeer, []string{"X-Forwarded-For", "203.0.113.7, fe80::1%eth0"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"zone in the client", edgePeer, []string{"X-Forwarded-For", "fe80::1%eth0, 10.1.1.1"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"two words in the client's entry", edgePeer, []string{"X-Forwarded-For", "x 203.0.113.7, 10.1.1.1"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"obfuscated", edgePeer, []string{"X-Forwarded-For", "_hidden"}, "10.0.0.1", sourcePeer, reasonInvalid},
	})
}

// TestRecursiveCaps: up to 16 trusted layers, the peer included, as hops
// 16; one more is too long, and so is a chain past the field cap, however
// the rest of it looks.
func TestRecursiveCaps(t *testing.T) {
	h := provision(t, recursiveConfig)
	trusted := func(n int) string {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf("10.1.1.%d", i+1))
		}
		return strings.Join(parts, ", ")
	}
	for _, tc := range []struct {
		name   string
		xff    string
		client string
		reason reason
	}{
		{"15 trusted members", callerIP + ", " + trusted(15), callerIP, reasonNone},
		{"16 trusted members", callerIP + ", " + trusted(16), "10.0.0.1", reasonTooLong},
		{"16 trusted members, nothing left", trusted(16), "10.0.0.1", reasonTooLong},
		{"15 trusted members, nothing left", trusted(15), "10.0.0.1", reasonShortChain},
		{"64 fields", callerIP + strings.Repeat(",", 63) + "10.1.1.1", callerIP, reasonNone},
		{"65 fields", callerIP + strings.Repeat(",", 64) + "10.1.1.1", "10.0.0.1", reasonTooLong},
		{"8 KiB", callerIP + strings.Repeat(" ", 8<<10), "10.0.0.1", reasonTooLong},
		{"entry longer than any address", strings.Repeat("1", 65) + ", 10.1.1.1", "10.0.0.1", reasonInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := h.resolver.resolve(edgePeer, hdr("X-Forwarded-For", tc.xff))
			if res.client.String() != tc.client || res.reason != tc.reason {
				t.Errorf("client %s reason %q, want %s %q", res.client, res.reason, tc.client, tc.reason)
			}
		})
	}
}

func TestRecursiveForwarded(t *testing.T) {
	runResolveCases(t, `{"trusted_proxies":["10.0.0.0/8"],"recursive":true,"forwarded":true}`, []resolveCase{
		{"client after two trusted", edgePeer, []string{"Forwarded", `for=6.6.6.6, for="203.0.113.7:4711";proto=https, for=10.1.1.1, for="[::ffff:10.2.2.2]"`}, callerIP, sourceForwarded, 0},
		{"IPv6 client", edgePeer, []string{"Forwarded", `for="[2001:db8::7]:443", for=10.1.1.1`}, "2001:db8::7", sourceForwarded, 0},
		{"every element trusted", edgePeer, []string{"Forwarded", "for=10.1.1.1, for=10.2.2.2"}, "10.0.0.1", sourcePeer, reasonShortChain},
		{"obfuscated in the trusted part", edgePeer, []string{"Forwarded", "for=203.0.113.7, for=_proxy"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"unknown client", edgePeer, []string{"Forwarded", "for=unknown, for=10.1.1.1"}, "10.0.0.1", sourcePeer, reasonInvalid},
	})
}

// TestRecursiveIsHopsWithTheRightCount: on random chains of trusted and
// untrusted addresses, recursive answers what hops answers with the count
// of trusted members plus one, and a chain with no untrusted member (or
// garbage before one) is never believed.
func TestRecursiveIsHopsWithTheRightCount(t *testing.T) {
	rec := provision(t, `{"trusted_proxies":["10.0.0.0/8"],"recursive":true}`)
	byHops := handlersByHops{`{"trusted_proxies":["10.0.0.0/8"],"hops":%d}`, map[int]*Handler{}}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := rng.IntN(20)
		parts := make([]string, n)
		for i := range parts {
			switch rng.IntN(4) {
			case 0:
				parts[i] = fmt.Sprintf("203.0.113.%d", rng.IntN(256))
			case 1:
				parts[i] = "junk"
			default:
				parts[i] = fmt.Sprintf("10.%d.0.1", rng.IntN(256))
			}
		}
		xff := strings.Join(parts, ", ")
		got := rec.resolver.resolve(edgePeer, hdr("X-Forwarded-For", xff))
		// The count: trusted members from the right, plus the peer.
		k := 0
		for k < n && strings.HasPrefix(parts[n-1-k], "10.") {
			k++
		}
		if k == n || k >= maxHops || parts[n-1-k] == "junk" {
			if got.viaEdge() {
				t.Fatalf("%q: believed %s", xff, got.client)
			}
			continue
		}
		h, _ := byHops.get(t, uint8(k))
		want := h.resolver.resolve(edgePeer, hdr("X-Forwarded-For", xff))
		if got.client != want.client || got.reason != want.reason || !got.viaEdge() {
			t.Fatalf("%q: recursive %s %q, hops %d %s %q", xff, got.client, got.reason, k+1, want.client, want.reason)
		}
	}
}

// TestServeRecursive: upstream, X-Forwarded-For starts at the client, as
// with hops.
func TestServeRecursive(t *testing.T) {
	h := provision(t, recursiveConfig)
	s, err := serve(t, h, edgePeer, http.Header{"X-Forwarded-For": {"6.6.6.6, 10.9.9.9, 203.0.113.7, 10.1.1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	s.checkPlaceholders(t, "10.0.0.1", "xff", "true", callerIP)
	if xff := s.header["X-Forwarded-For"]; len(xff) != 1 || xff[0] != "203.0.113.7, 10.1.1.1" {
		t.Errorf("X-Forwarded-For upstream %q", xff)
	}
}

func TestRecursiveRefusals(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{`{"trusted_proxies":["10.0.0.0/8"],"recursive":true,"hops":2}`, "hops and recursive are exclusive"},
		{`{"trusted_proxies":["10.0.0.0/8"],"recursive":true,"hops":1}`, "hops and recursive are exclusive"},
		{`{"secret":{"header":"X-S","value":"0123456789abcdef"},"recursive":true}`, "recursive skips the addresses in trusted_proxies, and none are listed"},
		{`{"trusted_proxies_unix":true,"recursive":true}`, "recursive skips the addresses in trusted_proxies, and none are listed"},
		{`{"trusted_proxies":["10.0.0.0/8"],"recursive":true,"header":"CF-Connecting-IP"}`, "recursive reads the client from the chain"},
		{`{"trusted_proxies":["10.0.0.0/8"],"recursive":true,"verify":{"keys":[{"id":"k1","secret":"` + testKey1 + `"}]}}`, "verify takes the client from the signed assertion"},
		{`{"trusted_proxies":["0.0.0.0/0"],"recursive":true}`, "covers every IPv4 address"},
	} {
		if _, err := tryProvision(tc.config); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.config, err, tc.want)
		}
	}
}
