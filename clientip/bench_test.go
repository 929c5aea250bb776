package clientip

import (
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
	for _, bc := range []struct {
		name, value string
		want        reason
	}{
		{"verify/ok", good, reasonNone},
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
