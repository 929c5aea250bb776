package clientip

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"unsafe"
)

const (
	edgeNet   = "10.0.0.0/8"
	edgePeer  = "10.0.0.1:4711"
	callerIP  = "203.0.113.7"
	strangers = "198.51.100.1:5555" // a caller that bypasses the edge
)

type resolveCase struct {
	name       string
	remoteAddr string
	header     []string // name/value pairs; a repeated name adds a line
	want       string   // expected client address
	source     source
	reason     reason // expected when source is sourcePeer
}

func runResolveCases(t *testing.T, config string, cases []resolveCase) {
	t.Helper()
	h := provision(t, config)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := h.resolver.resolve(tc.remoteAddr, hdr(tc.header...))
			if got := res.client.String(); got != tc.want {
				t.Errorf("client = %s, want %s", got, tc.want)
			}
			if res.source != tc.source {
				t.Errorf("source = %s, want %s", res.source, tc.source)
			}
			if tc.source == sourcePeer {
				if res.viaEdge() {
					t.Errorf("via_edge = true for a request that did not come through the edge")
				}
				if res.client != res.peer {
					t.Errorf("client %s is not the peer %s", res.client, res.peer)
				}
				if res.reason != tc.reason {
					t.Errorf("reason = %s, want %s", res.reason, tc.reason)
				}
			}
		})
	}
}

// TestHopsAroundChainLength builds, for hops 1..3, X-Forwarded-For chains of
// every length from empty to hops+2: the hops-1 rightmost entries are edge
// addresses, the one left of them is the caller, and anything further left
// is whatever the caller wrote. A chain shorter than hops is never believed.
func TestHopsAroundChainLength(t *testing.T) {
	for hops := 1; hops <= 3; hops++ {
		h := provision(t, fmt.Sprintf(`{"trusted_proxies":[%q],"hops":%d}`, edgeNet, hops))
		for length := 0; length <= hops+2; length++ {
			// entry i counts from the right
			entries := make([]string, length)
			for i := 0; i < length; i++ {
				switch {
				case i < hops-1:
					entries[length-1-i] = fmt.Sprintf("10.0.0.%d", i+2)
				case i == hops-1:
					entries[length-1-i] = callerIP
				default:
					entries[length-1-i] = fmt.Sprintf("192.0.2.%d", i) // caller-written
				}
			}
			xff := strings.Join(entries, ", ")
			t.Run(fmt.Sprintf("hops=%d/len=%d", hops, length), func(t *testing.T) {
				var header []string
				if length > 0 {
					header = []string{"X-Forwarded-For", xff}
				}
				res := h.resolver.resolve(edgePeer, hdr(header...))
				if length < hops {
					if res.viaEdge() || res.client.String() != "10.0.0.1" || res.reason != reasonShortChain {
						t.Errorf("XFF %q: got client %s via_edge %v reason %s, want the peer (short chain)", xff, res.client, res.viaEdge(), res.reason)
					}
					return
				}
				if !res.viaEdge() || res.client.String() != callerIP || res.source != sourceXFF {
					t.Errorf("XFF %q: got client %s source %s reason %s, want %s from xff", xff, res.client, res.source, res.reason, callerIP)
				}
			})
			// The same chain with one span member outside trusted_proxies.
			for bad := 0; bad < hops-1 && bad < length; bad++ {
				tampered := append([]string(nil), entries...)
				tampered[length-1-bad] = "192.0.2.200"
				xff := strings.Join(tampered, ", ")
				t.Run(fmt.Sprintf("hops=%d/len=%d/untrusted-hop-%d", hops, length, bad), func(t *testing.T) {
					res := h.resolver.resolve(edgePeer, hdr("X-Forwarded-For", xff))
					if res.viaEdge() || res.client.String() != "10.0.0.1" {
						t.Errorf("XFF %q: got client %s via_edge %v, want the peer", xff, res.client, res.viaEdge())
					}
				})
			}
		}
	}
}

func TestResolveListMode(t *testing.T) {
	long := func(n int) string {
		entries := make([]string, n)
		for i := range entries {
			entries[i] = callerIP
		}
		return strings.Join(entries, ",")
	}
	runResolveCases(t, `{"trusted_proxies":["10.0.0.0/8","::ffff:172.16.0.0/108"]}`, []resolveCase{
		{"plain", edgePeer, []string{"X-Forwarded-For", callerIP}, callerIP, sourceXFF, 0},
		{"caller bypasses the edge", strangers, []string{"X-Forwarded-For", "1.2.3.4"}, "198.51.100.1", sourcePeer, reasonUntrustedHop},
		{"no header", edgePeer, nil, "10.0.0.1", sourcePeer, reasonShortChain},
		{"empty header", edgePeer, []string{"X-Forwarded-For", ""}, "10.0.0.1", sourcePeer, reasonShortChain},
		{"garbage", edgePeer, []string{"X-Forwarded-For", "garbage"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"garbage left of the client is the caller's business", edgePeer, []string{"X-Forwarded-For", "garbage, " + callerIP}, callerIP, sourceXFF, 0},
		{"unknown", edgePeer, []string{"X-Forwarded-For", "unknown"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"obfuscated", edgePeer, []string{"X-Forwarded-For", "_hidden"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"quoted", edgePeer, []string{"X-Forwarded-For", `"203.0.113.7"`}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"ipv4 with port", edgePeer, []string{"X-Forwarded-For", "203.0.113.7:8080"}, callerIP, sourceXFF, 0},
		{"bad port", edgePeer, []string{"X-Forwarded-For", "203.0.113.7:65536"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"empty port", edgePeer, []string{"X-Forwarded-For", "203.0.113.7:"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"bare ipv6", edgePeer, []string{"X-Forwarded-For", "2001:db8::1"}, "2001:db8::1", sourceXFF, 0},
		{"bracketed ipv6", edgePeer, []string{"X-Forwarded-For", "[2001:db8::1]"}, "2001:db8::1", sourceXFF, 0},
		{"[v6]:port", edgePeer, []string{"X-Forwarded-For", "[2001:db8::1]:443"}, "2001:db8::1", sourceXFF, 0},
		{"[v4]:port is not a thing", edgePeer, []string{"X-Forwarded-For", "[203.0.113.7]:443"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"unclosed bracket", edgePeer, []string{"X-Forwarded-For", "[2001:db8::1"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"ipv4-mapped client", edgePeer, []string{"X-Forwarded-For", "::ffff:203.0.113.7"}, callerIP, sourceXFF, 0},
		{"ipv4-mapped client with port", edgePeer, []string{"X-Forwarded-For", "[::ffff:203.0.113.7]:80"}, callerIP, sourceXFF, 0},
		{"ipv4-mapped peer", "[::ffff:10.0.0.1]:4711", []string{"X-Forwarded-For", callerIP}, callerIP, sourceXFF, 0},
		{"peer in a mapped trusted prefix", "172.16.0.9:1", []string{"X-Forwarded-For", callerIP}, callerIP, sourceXFF, 0},
		{"zone", edgePeer, []string{"X-Forwarded-For", "fe80::1%eth0"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"empty members ignored", edgePeer, []string{"X-Forwarded-For", "192.0.2.9, , " + callerIP + " , ,"}, callerIP, sourceXFF, 0},
		{"tabs", edgePeer, []string{"X-Forwarded-For", "\t" + callerIP + "\t"}, callerIP, sourceXFF, 0},
		{"several lines, last one counts", edgePeer, []string{"X-Forwarded-For", "192.0.2.1", "X-Forwarded-For", callerIP}, callerIP, sourceXFF, 0},
		{"several lines, empty last", edgePeer, []string{"X-Forwarded-For", "192.0.2.1, " + callerIP, "X-Forwarded-For", ""}, callerIP, sourceXFF, 0},
		{"64 fields are fine", edgePeer, []string{"X-Forwarded-For", long(64)}, callerIP, sourceXFF, 0},
		{"65 fields: only the client's is read", edgePeer, []string{"X-Forwarded-For", long(65)}, callerIP, sourceXFF, 0},
		{"80 fields across lines", edgePeer, []string{"X-Forwarded-For", long(40), "X-Forwarded-For", long(40)}, callerIP, sourceXFF, 0},
		{"16 KiB of garbage", edgePeer, []string{"X-Forwarded-For", strings.Repeat("x", 16<<10)}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"8 KiB of garbage", edgePeer, []string{"X-Forwarded-For", strings.Repeat("x", 8<<10)}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"8 KiB of hex digits", edgePeer, []string{"X-Forwarded-For", strings.Repeat("1", 8<<10)}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"8 KiB of spaces left of the client", edgePeer, []string{"X-Forwarded-For", strings.Repeat(" ", 8<<10) + callerIP}, callerIP, sourceXFF, 0},
		{"over 8 KiB right of the client", edgePeer, []string{"X-Forwarded-For", callerIP + "," + strings.Repeat(" ", 8<<10)}, "10.0.0.1", sourcePeer, reasonTooLong},
		{"longest address", edgePeer, []string{"X-Forwarded-For", "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535"}, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", sourceXFF, 0},
		{"hex word", edgePeer, []string{"X-Forwarded-For", "dead"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"ipv6 with one colon", edgePeer, []string{"X-Forwarded-For", "fe80:1"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"other headers are not read", edgePeer, []string{"X-Forwarded-For", callerIP, "CF-Connecting-IP", "1.2.3.4", "Forwarded", "for=1.2.3.4"}, callerIP, sourceXFF, 0},
		{"unix socket peer", "@", []string{"X-Forwarded-For", callerIP}, "invalid IP", sourcePeer, reasonInvalid},
	})
}

func TestResolveHopsSpan(t *testing.T) {
	runResolveCases(t, `{"trusted_proxies":["10.0.0.0/8"],"hops":3}`, []resolveCase{
		{"full chain", edgePeer, []string{"X-Forwarded-For", "192.0.2.1, 203.0.113.7, 10.1.1.1, 10.2.2.2"}, callerIP, sourceXFF, 0},
		{"across lines", edgePeer, []string{"X-Forwarded-For", "203.0.113.7", "X-Forwarded-For", "10.1.1.1", "X-Forwarded-For", "10.2.2.2"}, callerIP, sourceXFF, 0},
		{"unknown inside the span", edgePeer, []string{"X-Forwarded-For", "203.0.113.7, unknown, 10.2.2.2"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"garbage inside the span", edgePeer, []string{"X-Forwarded-For", "203.0.113.7, 10.1.1.1, junk"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"port inside the span", edgePeer, []string{"X-Forwarded-For", "203.0.113.7, 10.1.1.1:80, [::ffff:10.2.2.2]:81"}, callerIP, sourceXFF, 0},
		{"caller forges the whole chain but bypasses the edge", strangers, []string{"X-Forwarded-For", "6.6.6.6, 10.1.1.1, 10.2.2.2"}, "198.51.100.1", sourcePeer, reasonUntrustedHop},
		{"invalid client entry", edgePeer, []string{"X-Forwarded-For", "garbage, 10.1.1.1, 10.2.2.2"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"chain one short", edgePeer, []string{"X-Forwarded-For", "10.1.1.1, 10.2.2.2"}, "10.0.0.1", sourcePeer, reasonShortChain},
	})
}

func TestResolveForwarded(t *testing.T) {
	elements := func(n int) string {
		e := make([]string, n)
		for i := range e {
			e[i] = "for=" + callerIP
		}
		return strings.Join(e, ", ")
	}
	runResolveCases(t, `{"trusted_proxies":["10.0.0.0/8"],"forwarded":true}`, []resolveCase{
		{"token", edgePeer, []string{"Forwarded", "for=203.0.113.7"}, callerIP, sourceForwarded, 0},
		{"case-insensitive name", edgePeer, []string{"Forwarded", "For=203.0.113.7"}, callerIP, sourceForwarded, 0},
		{"other parameters", edgePeer, []string{"Forwarded", "proto=https;for=203.0.113.7;by=10.0.0.1;host=example.com"}, callerIP, sourceForwarded, 0},
		{"quoted with port", edgePeer, []string{"Forwarded", `for="203.0.113.7:4711"`}, callerIP, sourceForwarded, 0},
		{"quoted ipv6 with port", edgePeer, []string{"Forwarded", `for="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17", sourceForwarded, 0},
		{"obfuscated port", edgePeer, []string{"Forwarded", `for="203.0.113.7:_port1"`}, callerIP, sourceForwarded, 0},
		{"ipv4-mapped", edgePeer, []string{"Forwarded", `for="[::ffff:203.0.113.7]"`}, callerIP, sourceForwarded, 0},
		{"unquoted port is malformed", edgePeer, []string{"Forwarded", "for=203.0.113.7:80"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"unknown", edgePeer, []string{"Forwarded", "for=unknown"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"obfuscated node", edgePeer, []string{"Forwarded", "for=_hidden"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"quoted obfuscated", edgePeer, []string{"Forwarded", `for="_gazonk:_p"`}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"no for", edgePeer, []string{"Forwarded", "proto=https"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"repeated for", edgePeer, []string{"Forwarded", "for=192.0.2.1;for=203.0.113.7"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"escaped quote", edgePeer, []string{"Forwarded", `for="\"203.0.113.7"`}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"unterminated quote", edgePeer, []string{"Forwarded", `for="203.0.113.7`}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"trailing junk", edgePeer, []string{"Forwarded", "for=203.0.113.7 junk"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"space around =", edgePeer, []string{"Forwarded", "for = 203.0.113.7"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"rightmost element counts", edgePeer, []string{"Forwarded", "for=192.0.2.1, for=203.0.113.7"}, callerIP, sourceForwarded, 0},
		{"comma inside quotes", edgePeer, []string{"Forwarded", `for="a,b", for=203.0.113.7`}, callerIP, sourceForwarded, 0},
		{"comma inside quotes is one bad element", edgePeer, []string{"Forwarded", `for=203.0.113.7, for="a,b"`}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"malformed element left of the client", edgePeer, []string{"Forwarded", `for="oops;, for=203.0.113.7`}, callerIP, sourceForwarded, 0},
		{"garbage element left of the client", edgePeer, []string{"Forwarded", `garbage, for=203.0.113.7`}, callerIP, sourceForwarded, 0},
		{"empty elements ignored", edgePeer, []string{"Forwarded", " , for=203.0.113.7 , ,"}, callerIP, sourceForwarded, 0},
		{"several lines", edgePeer, []string{"Forwarded", "for=192.0.2.1", "Forwarded", "for=203.0.113.7"}, callerIP, sourceForwarded, 0},
		{"X-Forwarded-For is not read", edgePeer, []string{"X-Forwarded-For", callerIP}, "10.0.0.1", sourcePeer, reasonShortChain},
		{"caller bypasses the edge", strangers, []string{"Forwarded", "for=1.2.3.4"}, "198.51.100.1", sourcePeer, reasonUntrustedHop},
		{"64 elements are fine", edgePeer, []string{"Forwarded", elements(64)}, callerIP, sourceForwarded, 0},
		{"65 elements: only the client's is read", edgePeer, []string{"Forwarded", elements(65)}, callerIP, sourceForwarded, 0},
		{"65 elements from the right", edgePeer, []string{"Forwarded", elements(1) + strings.Repeat(", ", 64)}, "10.0.0.1", sourcePeer, reasonTooLong},
		{"16 pairs are fine", edgePeer, []string{"Forwarded", "for=203.0.113.7" + strings.Repeat(";a=b", 15)}, callerIP, sourceForwarded, 0},
		{"17 pairs are not", edgePeer, []string{"Forwarded", "for=203.0.113.7" + strings.Repeat(";a=b", 16)}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"quotes before the element's comma", edgePeer, []string{"Forwarded", `for=1;a="x,y" "z", for=203.0.113.7`}, callerIP, sourceForwarded, 0},
		{"escaped quote in a bad element", edgePeer, []string{"Forwarded", `for=1;a="x\",y", for=203.0.113.7`}, callerIP, sourceForwarded, 0},
		{"escaped quote in a skipped element", edgePeer, []string{"Forwarded", `for=1;for=2;a="x\",y" "z,", for=203.0.113.7`}, callerIP, sourceForwarded, 0},
		{"unterminated quote in a skipped element", edgePeer, []string{"Forwarded", `for=1;for=2;a="x, for=203.0.113.7`}, callerIP, sourceForwarded, 0},
		{"a comma in quotes in the client's element", edgePeer, []string{"Forwarded", `for=203.0.113.7;ext="a,b"`}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"over 8 KiB", edgePeer, []string{"Forwarded", "for=203.0.113.7;ext=" + strings.Repeat("x", 8<<10)}, "10.0.0.1", sourcePeer, reasonTooLong},
	})
	runResolveCases(t, `{"trusted_proxies":["10.0.0.0/8"],"forwarded":true,"hops":2}`, []resolveCase{
		{"two hops", edgePeer, []string{"Forwarded", `for=203.0.113.7;proto=https, for="10.9.9.9:80"`}, callerIP, sourceForwarded, 0},
		{"untrusted hop", edgePeer, []string{"Forwarded", `for=203.0.113.7, for=192.0.2.1`}, "10.0.0.1", sourcePeer, reasonUntrustedHop},
		{"short", edgePeer, []string{"Forwarded", `for=10.9.9.9`}, "10.0.0.1", sourcePeer, reasonShortChain},
	})
}

func TestResolveHeaderMode(t *testing.T) {
	runResolveCases(t, `{"trusted_proxies":["10.0.0.0/8"],"header":"cf-connecting-ip"}`, []resolveCase{
		{"value", edgePeer, []string{"CF-Connecting-IP", callerIP}, callerIP, sourceHeader, 0},
		{"ipv6", edgePeer, []string{"CF-Connecting-IP", "2001:db8::1"}, "2001:db8::1", sourceHeader, 0},
		{"[v6]:port", edgePeer, []string{"CF-Connecting-IP", "[2001:db8::1]:443"}, "2001:db8::1", sourceHeader, 0},
		{"spaces", edgePeer, []string{"CF-Connecting-IP", " " + callerIP + " "}, callerIP, sourceHeader, 0},
		{"missing", edgePeer, nil, "10.0.0.1", sourcePeer, reasonInvalid},
		{"garbage", edgePeer, []string{"CF-Connecting-IP", "garbage"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"a list is not a single value", edgePeer, []string{"CF-Connecting-IP", "192.0.2.1, " + callerIP}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"two lines", edgePeer, []string{"CF-Connecting-IP", callerIP, "CF-Connecting-IP", "192.0.2.1"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"X-Forwarded-For is not read", edgePeer, []string{"X-Forwarded-For", callerIP}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"caller bypasses the edge", strangers, []string{"CF-Connecting-IP", "1.2.3.4"}, "198.51.100.1", sourcePeer, reasonUntrustedHop},
	})
	runResolveCases(t, `{"trusted_proxies":["10.0.0.0/8"],"header":"CF-Connecting-IP","hops":2}`, []resolveCase{
		{"span from X-Forwarded-For", edgePeer, []string{"X-Forwarded-For", "6.6.6.6, 10.9.9.9", "CF-Connecting-IP", callerIP}, callerIP, sourceHeader, 0},
		{"span too short", edgePeer, []string{"CF-Connecting-IP", callerIP}, "10.0.0.1", sourcePeer, reasonShortChain},
		{"untrusted hop", edgePeer, []string{"X-Forwarded-For", "192.0.2.1", "CF-Connecting-IP", callerIP}, "10.0.0.1", sourcePeer, reasonUntrustedHop},
	})
}

func TestResolveSecret(t *testing.T) {
	t.Setenv("CLIENTIP_TEST_SECRET", "s3cret-from-env")
	runResolveCases(t, `{"secret":{"header":"x-edge-secret","value":"{env.CLIENTIP_TEST_SECRET}"}}`, []resolveCase{
		{"right secret, any peer", strangers, []string{"X-Edge-Secret", "s3cret-from-env", "X-Forwarded-For", callerIP}, callerIP, sourceXFF, 0},
		{"missing", strangers, []string{"X-Forwarded-For", callerIP}, "198.51.100.1", sourcePeer, reasonSecret},
		{"wrong", strangers, []string{"X-Edge-Secret", "s3cret-from-enV", "X-Forwarded-For", callerIP}, "198.51.100.1", sourcePeer, reasonSecret},
		{"prefix", strangers, []string{"X-Edge-Secret", "s3cret", "X-Forwarded-For", callerIP}, "198.51.100.1", sourcePeer, reasonSecret},
		{"longer", strangers, []string{"X-Edge-Secret", "s3cret-from-env!", "X-Forwarded-For", callerIP}, "198.51.100.1", sourcePeer, reasonSecret},
		{"the unexpanded placeholder", strangers, []string{"X-Edge-Secret", "{env.CLIENTIP_TEST_SECRET}", "X-Forwarded-For", callerIP}, "198.51.100.1", sourcePeer, reasonSecret},
		{"sent twice", strangers, []string{"X-Edge-Secret", "s3cret-from-env", "X-Edge-Secret", "s3cret-from-env", "X-Forwarded-For", callerIP}, "198.51.100.1", sourcePeer, reasonSecret},
		{"right secret, bad client", strangers, []string{"X-Edge-Secret", "s3cret-from-env", "X-Forwarded-For", "unknown"}, "198.51.100.1", sourcePeer, reasonInvalid},
	})
	runResolveCases(t, `{"trusted_proxies":["10.0.0.0/8"],"secret":{"header":"X-Edge-Secret","value":"abc"}}`, []resolveCase{
		{"both proven", edgePeer, []string{"X-Edge-Secret", "abc", "X-Forwarded-For", callerIP}, callerIP, sourceXFF, 0},
		{"secret without the edge address", strangers, []string{"X-Edge-Secret", "abc", "X-Forwarded-For", callerIP}, "198.51.100.1", sourcePeer, reasonUntrustedHop},
		{"edge address without the secret", edgePeer, []string{"X-Forwarded-For", callerIP}, "10.0.0.1", sourcePeer, reasonSecret},
	})
}

func TestPrivateRanges(t *testing.T) {
	h := provision(t, `{"trusted_proxies":["private_ranges"]}`)
	for _, peer := range []string{"192.168.1.1:1", "172.16.5.5:1", "10.1.2.3:1", "127.0.0.1:1", "[fd00::1]:1", "[::1]:1"} {
		if res := h.resolver.resolve(peer, hdr("X-Forwarded-For", callerIP)); res.client != netip.MustParseAddr(callerIP) {
			t.Errorf("peer %s: client %s, want %s", peer, res.client, callerIP)
		}
	}
	if res := h.resolver.resolve("8.8.8.8:1", hdr("X-Forwarded-For", callerIP)); res.viaEdge() {
		t.Errorf("public peer treated as the edge")
	}
}

func TestParsePeer(t *testing.T) {
	for _, tc := range []struct{ remoteAddr, want string }{
		{"10.0.0.1:80", "10.0.0.1"},
		{"[2001:db8::1]:443", "2001:db8::1"},
		{"[fe80::1%eth0]:443", "fe80::1"}, // a real link-local peer: the zone is dropped, as Caddy does
		{"[::ffff:10.0.0.1]:80", "10.0.0.1"},
		{"@", "invalid IP"},
		{"", "invalid IP"},
	} {
		addr, _, _ := parsePeer(tc.remoteAddr)
		if addr.String() != tc.want {
			t.Errorf("parsePeer(%q) = %s, want %s", tc.remoteAddr, addr, tc.want)
		}
	}
}

func TestAddrStringReusesCanonicalText(t *testing.T) {
	text := "203.0.113.7:80"[:11]
	if s := addrString(netip.MustParseAddr(text), text); s != "203.0.113.7" || unsafe.StringData(s) != unsafe.StringData(text) {
		t.Errorf("canonical text not reused: %q", s)
	}
	if s := addrString(netip.MustParseAddr("2001:DB8::1"), "2001:DB8::1"); s != "2001:db8::1" {
		t.Errorf("non-canonical text kept: %q", s)
	}
}
