package clientip

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// fakeSource is an http.ip_sources module whose ranges a test sets while
// the handler runs, as a CDN-range plugin's refresh would. It hands out one
// slice per setting, as real sources do.
type fakeSource struct {
	// Initial ranges.
	Ranges []string `json:"ranges,omitempty"`

	current atomic.Pointer[[]netip.Prefix]
	calls   atomic.Int64
	lastReq atomic.Pointer[http.Request]
}

func init() {
	caddy.RegisterModule((*fakeSource)(nil))
}

func (*fakeSource) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.ip_sources.edgekit_unit_fake",
		New: func() caddy.Module { return new(fakeSource) },
	}
}

func (s *fakeSource) Provision(caddy.Context) error {
	s.set(s.Ranges...)
	return nil
}

func (s *fakeSource) set(cidrs ...string) {
	ranges := make([]netip.Prefix, len(cidrs))
	for i, c := range cidrs {
		ranges[i] = netip.MustParsePrefix(c)
	}
	s.current.Store(&ranges)
}

// overwrite rewrites the current answer in place: the same array, the same
// length, other ranges, as a source reusing its buffer on refresh does.
func (s *fakeSource) overwrite(cidrs ...string) {
	ranges := *s.current.Load()
	if len(ranges) != len(cidrs) {
		panic("overwrite keeps the length")
	}
	for i, c := range cidrs {
		ranges[i] = netip.MustParsePrefix(c)
	}
}

func (s *fakeSource) GetIPRanges(r *http.Request) []netip.Prefix {
	s.calls.Add(1)
	if r != nil {
		s.lastReq.Store(r)
	}
	return *s.current.Load()
}

// provisionWithFake provisions config and returns its fake source.
func provisionWithFake(t testing.TB, config string) (*Handler, *fakeSource) {
	t.Helper()
	h := provision(t, config)
	src, ok := h.resolver.ranges.(*fakeSource)
	if !ok {
		t.Fatalf("config %s: dynamic source is %T, want *fakeSource", config, h.resolver.ranges)
	}
	return h, src
}

func TestSourceRangesChangeWithoutReload(t *testing.T) {
	h, src := provisionWithFake(t, `{"trusted_proxies_source":{"source":"edgekit_unit_fake","ranges":["192.0.2.0/24"]}}`)
	header := hdr("X-Forwarded-For", "203.0.113.7")
	for _, step := range []struct {
		ranges  []string
		viaEdge bool
		reason  reason
	}{
		{[]string{"192.0.2.0/24"}, false, reasonUntrustedHop},
		{[]string{"192.0.2.0/24", "10.0.0.0/8"}, true, reasonNone},
		{[]string{"::ffff:10.0.0.0/104"}, true, reasonNone},            // mapped, as Caddy's static source keeps it
		{[]string{"::ffff:10.0.0.0/95"}, false, reasonSourceCoversAll}, // holds all of ::ffff:0:0/96
		{nil, false, reasonUntrustedHop},                               // an empty answer trusts nobody
		{[]string{"10.0.0.1/32"}, true, reasonNone},
		{[]string{"10.0.0.2/32"}, false, reasonUntrustedHop},
	} {
		src.set(step.ranges...)
		res := h.resolver.resolve("10.0.0.1:4711", header)
		if res.viaEdge() != step.viaEdge || res.reason != step.reason {
			t.Errorf("source ranges %v: via edge %v reason %q, want %v %q", step.ranges, res.viaEdge(), res.reason, step.viaEdge, step.reason)
		}
		if step.viaEdge && res.client != netip.MustParseAddr("203.0.113.7") {
			t.Errorf("source ranges %v: client %v, want 203.0.113.7", step.ranges, res.client)
		}
	}
}

// Every member of the span is checked against the fixed list and the
// source's answer together.
func TestSourceAddsToFixedList(t *testing.T) {
	h, src := provisionWithFake(t, `{"trusted_proxies":["10.0.0.0/8"],"hops":2,"trusted_proxies_source":{"source":"edgekit_unit_fake","ranges":["198.51.100.0/24"]}}`)
	for _, tc := range []struct {
		peer, xff string
		viaEdge   bool
	}{
		{"10.0.0.1:1", "203.0.113.7, 198.51.100.5", true},   // peer fixed, hop from the source
		{"198.51.100.9:1", "203.0.113.7, 10.9.9.9", true},   // peer from the source, hop fixed
		{"198.51.100.9:1", "203.0.113.7, 192.0.2.1", false}, // hop in neither
		{"192.0.2.1:1", "203.0.113.7, 10.9.9.9", false},     // peer in neither
	} {
		res := h.resolver.resolve(tc.peer, hdr("X-Forwarded-For", tc.xff))
		if res.viaEdge() != tc.viaEdge {
			t.Errorf("peer %s, X-Forwarded-For %q: via edge %v, want %v (reason %q)", tc.peer, tc.xff, res.viaEdge(), tc.viaEdge, res.reason)
		}
	}
	// Once the source drops its range, its members are no longer trusted.
	src.set("192.0.2.0/24")
	if res := h.resolver.resolve("198.51.100.9:1", hdr("X-Forwarded-For", "203.0.113.7, 10.9.9.9")); res.viaEdge() {
		t.Errorf("a peer the source no longer lists is still trusted")
	}
}

// A source's answer that covers every address is never believed, not even
// for a peer the fixed list trusts: the source is broken or poisoned, and
// failing closed is the only safe reading.
func TestSourceCoveringEverythingIsNotBelieved(t *testing.T) {
	h, src := provisionWithFake(t, `{"trusted_proxies":["10.0.0.0/8"],"trusted_proxies_source":{"source":"edgekit_unit_fake","ranges":["192.0.2.0/24"]}}`)
	header := hdr("X-Forwarded-For", "203.0.113.7")
	for _, tc := range []struct {
		ranges []string
		family string
	}{
		{[]string{"192.0.2.0/24", "0.0.0.0/0"}, "IPv4"},
		{[]string{"::/0"}, "IPv6"},
		{[]string{"::ffff:0:0/96"}, "IPv4"},
		{[]string{"::ffff:0:0/80"}, "IPv4"},
		{[]string{"0.0.0.0/1", "128.0.0.0/1"}, "IPv4"},
		{[]string{"192.0.2.0/24", "::/1", "8000::/1"}, "IPv6"},
		{[]string{"::ffff:0.0.0.0/97", "::ffff:128.0.0.0/97"}, "IPv4"},
	} {
		src.set(tc.ranges...)
		for range 2 { // the second time from the kept verdict
			res := h.resolver.resolve("10.0.0.1:4711", header)
			if res.viaEdge() || res.reason != reasonSourceCoversAll || res.coveredFamily != tc.family {
				t.Errorf("source ranges %v: via edge %v reason %q family %q, want not via edge, %q, %s", tc.ranges, res.viaEdge(), res.reason, res.coveredFamily, reasonSourceCoversAll, tc.family)
			}
		}
	}
	// Back to the edge's own ranges: believed again.
	src.set("192.0.2.0/24", "0.0.0.0/1")
	if res := h.resolver.resolve("10.0.0.1:4711", header); !res.viaEdge() {
		t.Errorf("after the source recovered: reason %q, want via edge", res.reason)
	}
}

// A source that refreshes by rewriting its slice in place (same array, same
// length) gets a fresh verdict: a union covering everything written over
// the edge's ranges is refused at once, and the edge's ranges written back
// are believed again.
func TestSourceRewritingItsSliceInPlaceIsJudgedAfresh(t *testing.T) {
	h, src := provisionWithFake(t, `{"trusted_proxies_source":{"source":"edgekit_unit_fake","ranges":["10.0.0.0/8","192.0.2.0/24"]}}`)
	header := hdr("X-Forwarded-For", "203.0.113.7")
	for _, step := range []struct {
		ranges  []string
		viaEdge bool
	}{
		{[]string{"10.0.0.0/8", "192.0.2.0/24"}, true},
		{[]string{"0.0.0.0/1", "128.0.0.0/1"}, false},
		{[]string{"10.0.0.0/8", "192.0.2.0/24"}, true},
		{[]string{"::/1", "8000::/1"}, false},
	} {
		src.overwrite(step.ranges...)
		res := h.resolver.resolve("10.0.0.1:4711", header)
		if res.viaEdge() != step.viaEdge || !step.viaEdge && res.reason != reasonSourceCoversAll {
			t.Errorf("source rewrote its slice to %v: via edge %v reason %q, want via edge %v", step.ranges, res.viaEdge(), res.reason, step.viaEdge)
		}
	}
}

// The source is asked with the request being served (Caddy's, with its
// replacer), not a copy or nil.
func TestSourceGetsTheRequest(t *testing.T) {
	h, src := provisionWithFake(t, `{"trusted_proxies_source":{"source":"edgekit_unit_fake","ranges":["10.0.0.0/8"]}}`)
	s, err := serve(t, h, "10.0.0.1:4711", hdr("X-Forwarded-For", "203.0.113.7"))
	if err != nil || s.clientIP != "203.0.113.7" {
		t.Fatalf("err %v client %v, want 203.0.113.7", err, s.clientIP)
	}
	r := src.lastReq.Load()
	if r == nil || r.RemoteAddr != "10.0.0.1:4711" || r.Context().Value(caddy.ReplacerCtxKey) == nil {
		t.Errorf("the source was asked with %v, want the served request", r)
	}
	if n := src.calls.Load(); n != 1 {
		t.Errorf("the source was asked %d times for one request, want 1", n)
	}
}

func TestSourceCoveringEverythingIsLoggedOncePerInterval(t *testing.T) {
	h, _ := provisionWithFake(t, `{"trusted_proxies_source":{"source":"edgekit_unit_fake","ranges":["0.0.0.0/0"]},"untrusted":"observe"}`)
	core, logs := observer.New(zap.ErrorLevel)
	h.logger = zap.New(core)
	counted := func() float64 {
		return testutil.ToFloat64(metrics.untrusted.WithLabelValues("source_covers_everything", "observe"))
	}
	before := counted()
	for range 3 {
		s, err := serve(t, h, "10.0.0.1:4711", hdr("X-Forwarded-For", "203.0.113.7", "X-Real-IP", "6.6.6.6"))
		if err != nil || !s.called || s.trusted != false || s.clientIP != "10.0.0.1" || s.header.Get("X-Real-IP") != "" {
			t.Fatalf("err %v called %v trusted %v client %v X-Real-IP %q: want the peer, untrusted, headers stripped", err, s.called, s.trusted, s.clientIP, s.header.Get("X-Real-IP"))
		}
	}
	if d := counted() - before; d != 3 {
		t.Errorf("untrusted_total{reason=source_covers_everything} rose by %v, want 3", d)
	}
	if n := logs.FilterMessageSnippet("covering every address").Len(); n != 1 {
		t.Errorf("%d error lines about the source in 3 requests, want 1 per %v", n, logInterval)
	}
	entry := logs.All()[0]
	if f := entry.ContextMap(); f["source"] != "http.ip_sources.edgekit_unit_fake" || f["covers"] != "IPv4" {
		t.Errorf("log fields %v, want the source's module ID and IPv4", f)
	}
	// A minute on, the next one is logged with the count since.
	h.resolver.guard.lastLog.Store(time.Now().Add(-logInterval).UnixNano())
	if _, err := serve(t, h, "10.0.0.1:4711", nil); err != nil {
		t.Fatal(err)
	}
	if n := logs.Len(); n != 2 {
		t.Fatalf("%d log lines after the interval, want 2", n)
	}
	if got := logs.All()[1].ContextMap()["requests_since_last_report"]; got != uint64(3) {
		t.Errorf("requests_since_last_report %v, want 3 (2 unlogged + this one)", got)
	}
}

// `static` is known when the config loads: its ranges join the fixed list,
// with the same refusals.
func TestStaticSourceIsAFixedList(t *testing.T) {
	h := provision(t, `{"trusted_proxies":["192.0.2.0/24"],"trusted_proxies_source":{"source":"static","ranges":["::ffff:10.0.0.0/104","2001:db8::/32"]}}`)
	if h.resolver.ranges != nil {
		t.Fatalf("static source kept as dynamic (%T)", h.resolver.ranges)
	}
	want := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	if len(h.resolver.trusted) != len(want) {
		t.Fatalf("fixed list %v, want %v", h.resolver.trusted, want)
	}
	for i := range want {
		if h.resolver.trusted[i] != want[i] {
			t.Errorf("fixed list %v, want %v", h.resolver.trusted, want)
		}
	}
	if res := h.resolver.resolve("10.0.0.1:1", hdr("X-Forwarded-For", "203.0.113.7")); !res.viaEdge() {
		t.Errorf("peer in the static source not trusted: %q", res.reason)
	}

	for _, tc := range []struct{ config, want string }{
		{`{"trusted_proxies_source":{"source":"static","ranges":["0.0.0.0/0"]}}`, "trusted_proxies with trusted_proxies_source static covers every IPv4 address"},
		{`{"trusted_proxies":["0.0.0.0/1"],"trusted_proxies_source":{"source":"static","ranges":["128.0.0.0/1"]}}`, "covers every IPv4 address"},
		{`{"trusted_proxies_source":{"source":"static"}}`, "trusted_proxies_source static has no ranges"},
		{`{"trusted_proxies_source":{"source":"static","ranges":["10.0.0.0/33"]}}`, "trusted_proxies_source: loading module 'static'"},
		{`{"trusted_proxies_source":{"source":"nosuch"}}`, "trusted_proxies_source: "},
		{`{"trusted_proxies_source":{"ranges":["10.0.0.0/8"]}}`, "trusted_proxies_source: "},
	} {
		_, err := tryProvision(tc.config)
		if err == nil || !strings.HasPrefix(err.Error(), "client_ip: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got  %v\n want client_ip: ...%s...", tc.config, err, tc.want)
		}
	}
	// A source alone verifies the edge, and an empty fixed list beside one
	// is harmless.
	for _, config := range []string{
		`{"trusted_proxies_source":{"source":"edgekit_unit_fake","ranges":["10.0.0.0/8"]}}`,
		`{"trusted_proxies":[],"trusted_proxies_source":{"source":"static","ranges":["10.0.0.0/8"]}}`,
	} {
		if _, err := tryProvision(config); err != nil {
			t.Errorf("%s: %v", config, err)
		}
	}
}

// The source path costs no allocation: the answer is matched in place, and
// the covers-everything verdict is kept for the slice.
func TestSourceResolveDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	h, _ := provisionWithFake(t, `{"trusted_proxies_source":{"source":"edgekit_unit_fake","ranges":["192.0.2.0/24","::ffff:10.0.0.0/104"]},"hops":3}`)
	header := hdr("X-Forwarded-For", "198.51.100.9, 203.0.113.7, 10.1.1.1, 10.2.2.2")
	if res := h.resolver.resolve("10.0.0.1:4711", header); !res.viaEdge() {
		t.Fatalf("not via edge: %q", res.reason)
	}
	if n := testing.AllocsPerRun(100, func() { h.resolver.resolve("10.0.0.1:4711", header) }); n != 0 {
		t.Errorf("%v allocations per resolve with a dynamic source, want 0", n)
	}
}

// FuzzSourceRanges checks the judgement of a source's answer (a feed the
// operator does not control): whenever the fixed-list check would refuse
// the same ranges as covering everything, the guard refuses them too, the
// kept verdict is the verdict, and an answer the guard lets through is
// matched as its unmapped prefixes would be.
func FuzzSourceRanges(f *testing.F) {
	for _, seed := range []struct{ ranges, addr string }{
		{"10.0.0.0/8,2001:db8::/32", "10.1.2.3"},
		{"0.0.0.0/1,128.0.0.0/1", "192.0.2.1"},
		{"::ffff:10.0.0.0/104", "10.0.0.1"},
		{"::ffff:0:0/95,::/0", "::1"},
		{"::/1,8000::/1,0.0.0.0/0", "2001:db8::1"},
		{"::ffff:0.0.0.0/97,::ffff:128.0.0.0/97", "::ffff:1.2.3.4"},
	} {
		f.Add(seed.ranges, seed.addr)
	}
	f.Fuzz(func(t *testing.T, list, addrText string) {
		var ranges []netip.Prefix
		for _, field := range strings.Split(list, ",") {
			if p, err := netip.ParsePrefix(field); err == nil {
				ranges = append(ranges, p)
			}
		}
		unmapped := make([]netip.Prefix, len(ranges))
		for i, p := range ranges {
			unmapped[i] = unmapPrefix(p)
		}
		var g rangeGuard
		verdict := g.coversEverything(ranges)
		if _, refused := coversEverything(unmapped); refused && verdict == "" {
			t.Fatalf("%v covers everything as a fixed list, but the guard believes it", ranges)
		}
		if again := g.coversEverything(ranges); again != verdict {
			t.Fatalf("%v: verdict %q, then %q from the kept one", ranges, verdict, again)
		}
		if fresh := new(rangeGuard).coversEverything(slices.Clone(ranges)); fresh != verdict {
			t.Fatalf("%v: verdict %q, but %q for a copy", ranges, verdict, fresh)
		}
		addr, err := netip.ParseAddr(addrText)
		if err != nil || verdict != "" {
			return
		}
		addr = addr.Unmap()
		if got, want := inSourcePrefixes(ranges, addr), inPrefixes(unmapped, addr); got != want {
			t.Fatalf("%v: %v matched %v, want %v (as the unmapped %v)", ranges, addr, got, want, unmapped)
		}
	})
}

// Requests judged while the source refreshes see one answer or the other,
// never a mix, and (under -race) share the guard without a data race.
func TestSourceChangesUnderConcurrentRequests(t *testing.T) {
	h, src := provisionWithFake(t, `{"trusted_proxies_source":{"source":"edgekit_unit_fake","ranges":["10.0.0.0/8"]}}`)
	header := hdr("X-Forwarded-For", "203.0.113.7")
	done := make(chan struct{})
	errs := make(chan string, 4)
	for range 4 {
		go func() {
			var failure string
			defer func() { errs <- failure }()
			for {
				select {
				case <-done:
					return
				default:
				}
				res := h.resolver.resolve("10.0.0.1:4711", header)
				ok := res.viaEdge() && res.clientText == "203.0.113.7" ||
					!res.viaEdge() && (res.reason == reasonUntrustedHop || res.reason == reasonSourceCoversAll)
				if !ok {
					failure = fmt.Sprintf("via edge %v client %s reason %q", res.viaEdge(), res.clientText, res.reason)
					return
				}
			}
		}()
	}
	for i := range 2000 {
		switch i % 3 {
		case 0:
			src.set("10.0.0.0/8")
		case 1:
			src.set("192.0.2.0/24")
		case 2:
			src.set("0.0.0.0/1", "128.0.0.0/1")
		}
	}
	close(done)
	for range 4 {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}
