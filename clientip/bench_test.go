package clientip

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Run: go test -run '^$' -bench . -benchmem ./clientip/

var benchCases = []struct {
	name, config string
	header       http.Header
}{
	{"xff/3hops", `{"trusted_proxies":["10.0.0.0/8"],"hops":3}`,
		hdr("X-Forwarded-For", "198.51.100.9, 203.0.113.7, 10.1.1.1, 10.2.2.2")},
	{"xff/3hops-ipv6-ports", `{"trusted_proxies":["10.0.0.0/8","2001:db8:e::/48"],"hops":3}`,
		hdr("X-Forwarded-For", "[2001:db8::7]:1234, [2001:db8:e::1]:80, 10.2.2.2:8080")},
	{"forwarded/3hops", `{"trusted_proxies":["10.0.0.0/8"],"hops":3,"forwarded":true}`,
		hdr("Forwarded", `for=198.51.100.9, for="203.0.113.7:4711";proto=https, for=10.1.1.1, for=10.2.2.2;by=10.0.0.1`)},
	{"header/3hops+secret", `{"trusted_proxies":["10.0.0.0/8"],"hops":3,"header":"CF-Connecting-IP","secret":{"header":"X-Edge-Secret","value":"0123456789abcdef0123456789abcdef0123456789"}}`,
		hdr("X-Forwarded-For", "10.1.1.1, 10.2.2.2", "CF-Connecting-IP", "203.0.113.7", "X-Edge-Secret", "0123456789abcdef0123456789abcdef0123456789")},
	{"xff/16KiB-garbage", `{"trusted_proxies":["10.0.0.0/8"],"hops":3}`,
		hdr("X-Forwarded-For", strings.Repeat("garbage!", 2<<10))},
	{"xff/16KiB-garbage-commas", `{"trusted_proxies":["10.0.0.0/8"],"hops":3}`,
		hdr("X-Forwarded-For", strings.Repeat("x,", 8<<10))},
	// Just under the 8 KiB bound, so the parser itself reads the garbage.
	{"xff/8KiB-garbage", `{"trusted_proxies":["10.0.0.0/8"]}`,
		hdr("X-Forwarded-For", strings.Repeat("garbage!", 1<<10))},
	{"xff/8KiB-garbage-hex-digits", `{"trusted_proxies":["10.0.0.0/8"]}`,
		hdr("X-Forwarded-For", strings.Repeat("1", 8<<10))},
	{"forwarded/16KiB-garbage", `{"trusted_proxies":["10.0.0.0/8"],"hops":3,"forwarded":true}`,
		hdr("Forwarded", strings.Repeat("for=x;", 2730))},
	{"forwarded/8KiB-garbage", `{"trusted_proxies":["10.0.0.0/8"],"hops":3,"forwarded":true}`,
		hdr("Forwarded", strings.Repeat("for=x;", 1365))},
	{"forwarded/8KiB-garbage-pairs", `{"trusted_proxies":["10.0.0.0/8"],"hops":3,"forwarded":true}`,
		hdr("Forwarded", strings.Repeat("a=b;", 2048))},
	// What a caller writes left of the client is never read: the cost is
	// that of the plain 3-hop chain.
	{"xff/1MiB-caller-padding", `{"trusted_proxies":["10.0.0.0/8"],"hops":3}`,
		hdr("X-Forwarded-For", strings.Repeat("x, ", 1<<20/3)+"203.0.113.7, 10.1.1.1, 10.2.2.2")},
	{"forwarded/1MiB-caller-padding", `{"trusted_proxies":["10.0.0.0/8"],"hops":3,"forwarded":true}`,
		hdr("Forwarded", strings.Repeat(`for="x, `, 1<<20/8)+"for=203.0.113.7, for=10.1.1.1, for=10.2.2.2")},
	// recursive: the same 3-hop chain, found by skipping trusted
	// addresses; the longest walk (15 trusted members); Forwarded; and
	// the chain behind a header list (the third header, X-Forwarded-For,
	// read after two absent ones), beside header mode's first header.
	{"xff/recursive-3hops", `{"trusted_proxies":["10.0.0.0/8"],"recursive":true}`,
		hdr("X-Forwarded-For", "198.51.100.9, 203.0.113.7, 10.1.1.1, 10.2.2.2")},
	{"xff/recursive-16hops", `{"trusted_proxies":["10.0.0.0/8"],"recursive":true}`,
		hdr("X-Forwarded-For", "203.0.113.7, 10.1.1.1, 10.1.1.2, 10.1.1.3, 10.1.1.4, 10.1.1.5, 10.1.1.6, 10.1.1.7, 10.1.1.8, 10.1.1.9, 10.1.1.10, 10.1.1.11, 10.1.1.12, 10.1.1.13, 10.1.1.14, 10.1.1.15")},
	{"forwarded/recursive-3hops", `{"trusted_proxies":["10.0.0.0/8"],"recursive":true,"forwarded":true}`,
		hdr("Forwarded", `for=198.51.100.9, for="203.0.113.7:4711";proto=https, for=10.1.1.1, for=10.2.2.2;by=10.0.0.1`)},
	{"header/list-first", `{"trusted_proxies":["10.0.0.0/8"],"hops":3,"headers":["CF-Connecting-IP","True-Client-IP","X-Forwarded-For"]}`,
		hdr("X-Forwarded-For", "10.1.1.1, 10.2.2.2", "CF-Connecting-IP", "203.0.113.7")},
	{"header/list-xff-fallback", `{"trusted_proxies":["10.0.0.0/8"],"hops":3,"headers":["CF-Connecting-IP","True-Client-IP","X-Forwarded-For"]}`,
		hdr("X-Forwarded-For", "198.51.100.9, 203.0.113.7, 10.1.1.1, 10.2.2.2")},
	{"xff/recursive-1MiB-caller-padding", `{"trusted_proxies":["10.0.0.0/8"],"recursive":true}`,
		hdr("X-Forwarded-For", strings.Repeat("10.9.9.9, ", 1<<20/10)+"203.0.113.7, 10.1.1.1, 10.2.2.2")},
	{"forwarded/8KiB-garbage-quotes", `{"trusted_proxies":["10.0.0.0/8"],"hops":3,"forwarded":true}`,
		hdr("Forwarded", "for=x;for="+strings.Repeat(`"x"`, 2700))},
}

func BenchmarkResolve(b *testing.B) {
	for _, bc := range benchCases {
		h := provision(b, bc.config)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res := h.resolver.resolve("10.0.0.1:4711", bc.header)
				if strings.Contains(bc.name, "garbage") == res.viaEdge() {
					b.Fatalf("unexpected result %+v", res)
				}
			}
		})
	}
}

// TestResolveDoesNotAllocate holds the resolve path to zero allocations for
// every mode, on good chains and on hostile ones.
func TestResolveDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	for _, bc := range benchCases {
		h := provision(t, bc.config)
		if n := testing.AllocsPerRun(100, func() { h.resolver.resolve("10.0.0.1:4711", bc.header) }); n != 0 {
			t.Errorf("%s: %v allocations per resolve, want 0", bc.name, n)
		}
	}
}

// BenchmarkServeHTTP is the whole handler: resolution plus publishing the
// vars, placeholders and log fields Caddy needs. "caddy-baseline" is the
// request preparation Caddy does anyway, without client_ip, for comparison.
func BenchmarkServeHTTP(b *testing.B) {
	h := provision(b, benchCases[0].config)
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	r := httptest.NewRequest(http.MethodGet, "http://example.com/", nil)
	r.RemoteAddr = "10.0.0.1:4711"
	w := httptest.NewRecorder()
	for _, withHandler := range []bool{false, true} {
		name := "caddy-baseline"
		if withHandler {
			name = "client_ip"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Header = http.Header{"X-Forwarded-For": {"198.51.100.9, 203.0.113.7, 10.1.1.1, 10.2.2.2"}}
				req := caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, nil)
				var err error
				if withHandler {
					err = h.ServeHTTP(w, req, next)
				} else {
					err = next.ServeHTTP(w, req)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAssertion is the per-request cost of signed edge assertions:
// verifying at the origin (accepted, and each way of refusing) and signing
// at the PoP, beside plain 1-hop X-Forwarded-For resolution for scale.
func BenchmarkAssertion(b *testing.B) {
	pop := popHandler(b, "k1", testKey1)
	const target = "http://shop.example/cart/add?item=42"
	good := pop.signer.sign(phone, newRequest("GET", target, popPeer))
	origin := originHandler(b, time.Second, "k1", testKey1, "k2", testKey2)
	xff := provision(b, `{"trusted_proxies":["10.0.0.0/8"]}`)
	// Each assertion is accepted once, so verify/ok goes through distinct
	// ones, emptying the record (keeping its maps' capacity, as recycling a
	// generation does) each time they are all used.
	b.Run("verify/ok", func(b *testing.B) {
		reqs := make([]*http.Request, 4096)
		for i := range reqs {
			r := newRequest("GET", target, popPeer)
			r.Header.Set("X-Edge-Assertion", pop.signer.sign(fmt.Sprintf("203.0.%d.%d", i/256, i%256), r))
			reqs[i] = r
		}
		resetReplayCache(origin.resolver.verify.used) // b.Run calls this again for each b.N
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if i%len(reqs) == 0 && i > 0 {
				b.StopTimer()
				resetReplayCache(origin.resolver.verify.used)
				b.StartTimer()
			}
			if res := origin.resolver.resolveRequest(reqs[i%len(reqs)]); res.reason != reasonNone {
				b.Fatalf("reason %v, want %v", res.reason, reasonNone)
			}
		}
	})
	if res := origin.resolver.resolveRequest(newRequest("GET", target, popPeer, "X-Edge-Assertion", good)); res.reason != reasonNone {
		b.Fatalf("first use: %v", res.reason)
	}
	for _, bc := range []struct {
		name, value string
		want        reason
	}{
		{"verify/replayed", good, reasonAssertionReplayed},
		{"verify/bad-signature", good[:len(good)-1] + "A", reasonAssertionBadSignature},
		{"verify/unknown-key", strings.Replace(good, "kid=k1", "kid=k3", 1), reasonAssertionUnknownKey},
		{"verify/malformed", "v1 ip=203.0.113.7 t=1764590000", reasonAssertionMalformed},
	} {
		r := newRequest("GET", target, popPeer, "X-Edge-Assertion", bc.value)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if res := origin.resolver.resolveRequest(r); res.reason != bc.want {
					b.Fatalf("reason %v, want %v", res.reason, bc.want)
				}
			}
		})
	}
	b.Run("sign", func(b *testing.B) {
		r := newRequest("GET", target, popPeer)
		b.ReportAllocs()
		for b.Loop() {
			if v := pop.signer.sign(phone, r); len(v) != len(good) {
				b.Fatalf("signed %q", v)
			}
		}
	})
	b.Run("xff/1hop", func(b *testing.B) {
		header := hdr("X-Forwarded-For", phone)
		b.ReportAllocs()
		for b.Loop() {
			if res := xff.resolver.resolve(popPeer, header); !res.viaEdge() {
				b.Fatal("not via the edge")
			}
		}
	})
}

// cloudflareLike is as many ranges as Cloudflare publishes (15 IPv4, 7
// IPv6), in documentation and private space, the edge last.
var cloudflareLike = []string{
	"198.18.0.0/20", "198.18.16.0/22", "198.18.20.0/22", "198.18.24.0/22", "198.18.28.0/22",
	"198.18.32.0/18", "198.18.64.0/18", "198.18.128.0/20", "198.18.144.0/20", "198.18.160.0/20",
	"198.18.176.0/20", "198.18.192.0/20", "198.18.208.0/20", "198.18.224.0/20", "10.0.0.0/8",
	"2001:db8:1::/48", "2001:db8:2::/48", "2001:db8:3::/48", "2001:db8:4::/48", "2001:db8:5::/48",
	"2001:db8:6::/48", "2001:db8:7::/48",
}

// BenchmarkTrustedProxiesSource is the whole handler with the edge's ranges
// as a fixed list, as a static source (folded into the fixed list at load)
// and as a dynamic source asked per request, side by side. "3hops" is a
// chain through the edge with one range; "22ranges-*" has a Cloudflare-sized
// list with the edge's range last, for a peer in it and one outside it (the
// whole list scanned). "resolve" is the judgement alone, "handler" is
// ServeHTTP with Caddy's request preparation (whose allocations are Caddy's:
// see BenchmarkServeHTTP's caddy-baseline).
//
// Run: go test -run '^$' -bench TrustedProxiesSource -benchmem ./clientip/
func BenchmarkTrustedProxiesSource(b *testing.B) {
	quoted := func(cidrs []string) string { return `"` + strings.Join(cidrs, `","`) + `"` }
	kinds := []struct{ name, config string }{
		{"fixed-list", `{"trusted_proxies":[RANGES],"hops":HOPS}`},
		{"static-source", `{"trusted_proxies_source":{"source":"static","ranges":[RANGES]},"hops":HOPS}`},
		{"dynamic-source", `{"trusted_proxies_source":{"source":"edgekit_unit_fake","ranges":[RANGES]},"hops":HOPS}`},
	}
	cases := []struct {
		name, ranges, hops, peer, xff string
		viaEdge                       bool
	}{
		{"3hops", quoted([]string{"10.0.0.0/8"}), "3", "10.0.0.1:4711", "198.51.100.9, 203.0.113.7, 10.1.1.1, 10.2.2.2", true},
		{"22ranges-edge", quoted(cloudflareLike), "1", "10.0.0.1:4711", "203.0.113.7", true},
		{"22ranges-stranger", quoted(cloudflareLike), "1", "192.0.2.1:4711", "203.0.113.7", false},
	}
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	w := httptest.NewRecorder()
	for _, c := range cases {
		for _, k := range kinds {
			config := strings.NewReplacer("RANGES", c.ranges, "HOPS", c.hops).Replace(k.config)
			h := provision(b, config)
			if (k.name == "dynamic-source") != (h.resolver.ranges != nil) {
				b.Fatalf("%s: dynamic source %T", k.name, h.resolver.ranges)
			}
			r := httptest.NewRequest(http.MethodGet, "http://example.com/", nil)
			r.RemoteAddr = c.peer
			header := http.Header{"X-Forwarded-For": {c.xff}}
			b.Run("resolve/"+c.name+"/"+k.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if res := h.resolver.judge(c.peer, header, r); res.viaEdge() != c.viaEdge {
						b.Fatalf("via edge %v, want %v (%q)", res.viaEdge(), c.viaEdge, res.reason)
					}
				}
			})
			b.Run("handler/"+c.name+"/"+k.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					r.Header = http.Header{"X-Forwarded-For": {c.xff}}
					req := caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, nil)
					if err := h.ServeHTTP(w, req, next); err != nil {
						b.Fatal(err)
					}
					if got := caddyhttp.GetVar(req.Context(), caddyhttp.TrustedProxyVarKey); got != c.viaEdge {
						b.Fatalf("trusted_proxy %v, want %v", got, c.viaEdge)
					}
				}
			})
		}
	}
}
