package ratelimit

import (
	"crypto/sha256"
	"encoding/base64"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// leakyBucket is the ITU-T I.371 continuous-state leaky bucket, written
// independently of the GCRA code: the reference the limiter must match
// request for request. The bucket drains one unit per nanosecond, each
// request adds increment, and a request that would overflow limit+increment
// is refused without adding.
type leakyBucket struct {
	increment, limit int64
	level, last      int64
	started          bool
}

func (b *leakyBucket) offer(now int64) bool {
	level := b.level
	if b.started {
		level = max(0, level-(now-b.last))
	}
	if level > b.limit {
		return false
	}
	b.level, b.last, b.started = level+b.increment, now, true
	return true
}

func memoryHandler(t testing.TB, c *fakeClock, zones ...*Zone) *Handler {
	return provision(t, &Handler{Zones: zones, Store: &Store{Type: "memory", MaxKeys: 1000}}, c)
}

// TestExactAgainstLeakyBucket drives long random request sequences through
// the handler on an injected clock and checks every single decision.
func TestExactAgainstLeakyBucket(t *testing.T) {
	steps := 20000
	if testing.Short() {
		steps = 3000
	}
	for _, tc := range []struct {
		rate  string
		burst int64
	}{
		{"5/s", 4}, {"100/1m", 0}, {"10/s", 20}, {"1/h", 2}, {"7/700ms", 3},
	} {
		t.Run(tc.rate+"+"+strconv.FormatInt(tc.burst, 10), func(t *testing.T) {
			c := &fakeClock{ns: int64(time.Hour)}
			h := memoryHandler(t, c, &Zone{Name: "exact-" + tc.rate, Rate: tc.rate, Burst: new(tc.burst)})
			r, _ := parseRate(tc.rate)
			T := int64(r.period) / r.n
			ref := &leakyBucket{increment: T, limit: tc.burst * T}
			rng := rand.New(rand.NewPCG(1, uint64(T)))
			allowed, rejected := 0, 0
			for i := range steps {
				// Bursts of back-to-back requests, then gaps around T.
				if rng.IntN(4) == 0 {
					c.ns += rng.Int64N(3 * T)
				}
				want := ref.offer(c.ns)
				got := serve(t, h, "192.0.2.1", nil)
				if got.passed != want {
					t.Fatalf("request %d at %v: passed=%v, leaky bucket says %v", i, time.Duration(c.ns), got.passed, want)
				}
				if want {
					allowed++
				} else {
					rejected++
				}
			}
			if allowed == 0 || rejected == 0 {
				t.Fatalf("sequence did not exercise both outcomes: %d allowed, %d rejected", allowed, rejected)
			}
		})
	}
}

// TestBurst: rate 5/s with burst 4 lets 5 through at once, then one every
// 200ms, as SPEC says.
func TestBurst(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := memoryHandler(t, c, &Zone{Name: "burst", Rate: "5/s", Burst: new(int64(4))})
	for i := range 5 {
		if res := serve(t, h, "192.0.2.1", nil); !res.passed {
			t.Fatalf("request %d of the initial burst rejected", i+1)
		}
	}
	res := serve(t, h, "192.0.2.1", nil)
	if res.passed || res.status != 429 {
		t.Fatalf("6th request at once: passed=%v status %d, want 429", res.passed, res.status)
	}
	if got := res.header.Get("Retry-After"); got != "1" {
		t.Fatalf("Retry-After %q, want 1 (200ms rounded up)", got)
	}
	for i := range 10 {
		c.ns += int64(199 * time.Millisecond)
		if serve(t, h, "192.0.2.1", nil).passed {
			t.Fatalf("step %d: passed 199ms after the last one", i)
		}
		c.ns += int64(time.Millisecond)
		if !serve(t, h, "192.0.2.1", nil).passed {
			t.Fatalf("step %d: rejected 200ms after the last one", i)
		}
	}
	if serve(t, h, "192.0.2.2", nil).passed != true {
		t.Fatal("another caller was limited by the first one's budget")
	}
}

// TestZonesRejectionConsumesNothing: a request one zone rejects leaves the
// other zones' budgets as they were.
func TestZonesRejectionConsumesNothing(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := memoryHandler(t, c,
		&Zone{Name: "per-ip", Rate: "2/s", Burst: new(int64(1))},
		&Zone{Name: "per-user", Key: "{http.request.header.X-User}", Rate: "3/1m", Burst: new(int64(2))},
	)
	alice := map[string]string{"X-User": "alice"}
	// per-ip allows 2 at once; per-user allows 3 at once.
	for i := range 2 {
		if !serve(t, h, "192.0.2.1", alice).passed {
			t.Fatalf("request %d rejected", i)
		}
	}
	// per-ip rejects the next 50: per-user must not be charged for them.
	for range 50 {
		if res := serve(t, h, "192.0.2.1", alice); res.passed {
			t.Fatal("per-ip should reject")
		}
	}
	// From another address alice still has exactly one request left.
	if !serve(t, h, "192.0.2.9", alice).passed {
		t.Fatal("per-user budget was consumed by requests per-ip rejected")
	}
	res := serve(t, h, "192.0.2.10", alice)
	if res.passed {
		t.Fatal("per-user should now reject: 3 of 3 used")
	}
	// ...and that rejection consumed nothing in per-ip for 192.0.2.10.
	for i := range 2 {
		if !serve(t, h, "192.0.2.10", map[string]string{"X-User": "bob"}).passed {
			t.Fatalf("per-ip of 192.0.2.10 was charged by a per-user rejection (request %d)", i)
		}
	}
}

// TestPrefixGrouping: IPv6 callers are grouped by /64 by default, IPv4 by
// /32; both are configurable.
func TestPrefixGrouping(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := memoryHandler(t, c, &Zone{Name: "prefix-default", Rate: "1/1m"})
	mustPass := func(h *Handler, ip string, want bool) {
		t.Helper()
		if got := serve(t, h, ip, nil).passed; got != want {
			t.Fatalf("%s: passed=%v, want %v", ip, got, want)
		}
	}
	mustPass(h, "2001:db8:1:2::1", true)
	mustPass(h, "2001:db8:1:2:ffff::99", false) // same /64
	mustPass(h, "2001:db8:1:3::1", true)        // next /64
	mustPass(h, "192.0.2.1", true)
	mustPass(h, "192.0.2.2", true)         // /32: another caller
	mustPass(h, "::ffff:192.0.2.1", false) // IPv4-mapped is the same caller
	mustPass(h, "fe80::1%eth0", true)
	mustPass(h, "fe80::2%eth1", false) // zones do not split a /64

	h2 := memoryHandler(t, c, &Zone{Name: "prefix-custom", Rate: "1/1m", IPv4Prefix: 24, IPv6Prefix: 48})
	mustPass(h2, "198.51.100.1", true)
	mustPass(h2, "198.51.100.200", false) // same /24
	mustPass(h2, "198.51.101.1", true)
	mustPass(h2, "2001:db8:aa::1", true)
	mustPass(h2, "2001:db8:aa:ffff::1", false) // same /48
	mustPass(h2, "2001:db8:ab::1", true)
}

// pkOf is the pk parameter of the first list member of a RateLimit or
// RateLimit-Policy value that has one.
var pkParam = regexp.MustCompile(`;pk=:([A-Za-z0-9+/=]*):`)

func pkOf(t *testing.T, field string) string {
	t.Helper()
	m := pkParam.FindStringSubmatch(field)
	if m == nil {
		t.Fatalf("no pk in %q", field)
	}
	b, err := base64.StdEncoding.DecodeString(m[1])
	if err != nil || len(b) != pkSize {
		t.Fatalf("pk %q: %d bytes, %v; want %d bytes of base64", m[1], len(b), err, pkSize)
	}
	return m[1]
}

// stripPK drops every pk parameter, leaving what the zone's state says.
func stripPK(field string) string { return pkParam.ReplaceAllString(field, "") }

func TestRateLimitHeaders(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := memoryHandler(t, c,
		&Zone{Name: "a", Rate: "5/s", Burst: new(int64(4))},
		&Zone{Name: "b", Rate: "100/1m", Burst: new(int64(9))},
	)
	res := serve(t, h, "192.0.2.1", nil)
	policy, state := res.header.Get("RateLimit-Policy"), res.header.Get("RateLimit")
	if got, want := stripPK(policy), `"a";q=5;w=1, "b";q=100;w=60`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", policy, want)
	}
	if got, want := stripPK(state), `"a";r=4;t=0, "b";r=9;t=0`; got != want {
		t.Errorf("RateLimit %q, want %q", state, want)
	}
	// Every member carries the caller's pk: both zones key on the address.
	pk := pkOf(t, policy)
	if strings.Count(policy, ";pk=:"+pk+":") != 2 || strings.Count(state, ";pk=:"+pk+":") != 2 {
		t.Errorf("pk %s not on every member: %q, %q", pk, policy, state)
	}
	for range 4 {
		serve(t, h, "192.0.2.1", nil)
	}
	// a is exhausted: 0 left, next one in 200ms -> t=1.
	res = serve(t, h, "192.0.2.1", nil)
	if res.status != 429 {
		t.Fatalf("status %d, want 429", res.status)
	}
	if got, want := stripPK(res.header.Get("RateLimit")), `"a";r=0;t=1, "b";r=5;t=0`; got != want {
		t.Errorf("RateLimit on rejection %q, want %q", got, want)
	}
	if got := pkOf(t, res.header.Get("RateLimit")); got != pk {
		t.Errorf("one caller, two pks: %s then %s", pk, got)
	}
	if other := pkOf(t, serve(t, h, "192.0.2.2", nil).header.Get("RateLimit")); other == pk {
		t.Errorf("two callers, one pk %s", pk)
	}
	off := false
	h = provision(t, &Handler{Zones: []*Zone{{Name: "c", Rate: "1/s"}}, Headers: &off, Status: 503}, c)
	serve(t, h, "192.0.2.1", nil)
	res = serve(t, h, "192.0.2.1", nil)
	if res.header.Get("RateLimit") != "" || res.header.Get("RateLimit-Policy") != "" {
		t.Errorf("headers off still wrote %v", res.header)
	}
	if res.status != 503 || res.header.Get("Retry-After") != "1" {
		t.Errorf("status %d Retry-After %q, want 503 and 1", res.status, res.header.Get("Retry-After"))
	}
}

// TestPartitionKeyIsNotTheKey: pk is a keyed hash: the same for one caller
// (an IPv6 /64 is one caller), different for others, and neither the key
// nor its plain SHA-256 appears in it.
func TestPartitionKeyIsNotTheKey(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := memoryHandler(t, c, &Zone{Name: "pk-text", Key: "{http.request.header.X-Api-Key}", Rate: "10/s"})
	secret := "sk_live_0123456789"
	field := serve(t, h, "192.0.2.1", map[string]string{"X-Api-Key": secret}).header.Get("RateLimit")
	pk := pkOf(t, field)
	plain := sha256.Sum256([]byte(secret))
	for _, leak := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), base64.StdEncoding.EncodeToString(plain[:pkSize])} {
		if strings.Contains(field, leak) {
			t.Fatalf("RateLimit %q shows the key (%q)", field, leak)
		}
	}
	if again := pkOf(t, serve(t, h, "192.0.2.9", map[string]string{"X-Api-Key": secret}).header.Get("RateLimit")); again != pk {
		t.Fatalf("one key, two pks: %s, %s", pk, again)
	}
	hv6 := memoryHandler(t, c, &Zone{Name: "pk-v6", Rate: "10/s"})
	a := pkOf(t, serve(t, hv6, "2001:db8:1:2::a", nil).header.Get("RateLimit-Policy"))
	b := pkOf(t, serve(t, hv6, "2001:db8:1:2::b", nil).header.Get("RateLimit-Policy"))
	d := pkOf(t, serve(t, hv6, "2001:db8:1:3::a", nil).header.Get("RateLimit-Policy"))
	if a != b || a == d {
		t.Fatalf("pks of one /64: %s, %s; of another: %s", a, b, d)
	}
	if text, addr := (requestKey{text: "192.0.2.1/32"}).pk(), (requestKey{}).pk(); text == addr {
		t.Fatal("a text key and an address key share a pk")
	}
}

// TestRemainingNeverExceedsQuota: r is never above the announced q (rate
// 2/s burst 5 announced q=2 and then r=5).
func TestRemainingNeverExceedsQuota(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := memoryHandler(t, c, &Zone{Name: "r-le-q", Rate: "2/s", Burst: new(int64(5))})
	policy := stripPK(serve(t, h, "192.0.2.7", nil).header.Get("RateLimit-Policy"))
	if policy != `"r-le-q";q=6;w=3` {
		t.Fatalf("RateLimit-Policy %q, want q=6;w=3 (the burst of 6, refilled in 3 s)", policy)
	}
	for rateStr, bursts := range map[string][]int64{
		"2/s": {0, 1, 5, 100}, "10/s": {0, 9, 10, 50}, "100/1m": {0, 99, 100, 1000},
		"5/500ms": {0, 9, 10, 11}, "3/1001ms": {0, 4, 5, 7}, "1/1h": {0, 5}, "1000000/1d": {0, 999999, 1000000},
	} {
		r, err := parseRate(rateStr)
		if err != nil {
			t.Fatal(err)
		}
		for _, burst := range bursts {
			l := newLimit(r, burst)
			q, w := announce(r, burst)
			if most := l.remaining(outcome{allowed: true}); most > q {
				t.Errorf("%s burst %d: r can be %d, announced q=%d", rateStr, burst, most, q)
			}
			// Never a promise the limit breaks: q requests spread evenly
			// over w seconds all pass.
			now, tat := int64(time.Hour), int64(0)
			for i := range q {
				o, next := l.check(tat, now)
				if !o.allowed {
					t.Errorf("%s burst %d: q=%d;w=%d, but request %d of them, evenly spread, was refused", rateStr, burst, q, w, i+1)
					break
				}
				tat = next
				now += int64(time.Duration(w)*time.Second) / q
			}
		}
	}
}

func TestPolicyWindow(t *testing.T) {
	for in, want := range map[string]string{
		"10/s": `"z";q=10;w=1`, "100/1m": `"z";q=100;w=60`, "5/500ms": `"z";q=10;w=1`,
		"3/90s": `"z";q=3;w=90`, "1000/1d": `"z";q=1000;w=86400`, "1/1500ms": `"z";q=1;w=2`,
	} {
		r, err := parseRate(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := policyItem("z", r, 0); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// TestObserve: observe never rejects, but counts, logs and marks what
// enforce would have rejected, and consumes exactly what enforce would.
func TestObserve(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := provision(t, &Handler{Zones: []*Zone{{Name: "observed", Rate: "1/s", Burst: new(int64(1))}}, Mode: "observe"}, c)
	before := counterValue(t, "observed", "observed")
	var marked int
	for i := range 10 {
		res := serve(t, h, "192.0.2.1", nil)
		if !res.passed || res.status != 200 {
			t.Fatalf("observe mode rejected request %d", i)
		}
		if res.vars[ObservedVar] == "observed" {
			marked++
		}
	}
	if marked != 8 {
		t.Errorf("%d requests marked %s, want 8 (2 of 10 within burst)", marked, ObservedVar)
	}
	if got := counterValue(t, "observed", "observed") - before; got != 8 {
		t.Errorf("caddy_throttle_requests_total{decision=observed} grew by %v, want 8", got)
	}
	c.ns += int64(time.Second)
	if res := serve(t, h, "192.0.2.1", nil); res.vars[ObservedVar] != nil {
		t.Error("a request enforce would allow was marked")
	}
}

// TestConcurrentAllOrNothing: concurrent requests on a frozen clock across
// two zones; exactly the budget passes, and rejected requests consume
// nothing in the other zone.
func TestConcurrentAllOrNothing(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := memoryHandler(t, c,
		&Zone{Name: "conc-ip", Rate: "1/1h", Burst: new(int64(49))},
		&Zone{Name: "conc-user", Key: "{http.request.header.X-User}", Rate: "1/1h", Burst: new(int64(99))},
	)
	alice := map[string]string{"X-User": "alice"}
	var passed atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if serve(t, h, "192.0.2.1", alice).passed {
					passed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if passed.Load() != 50 {
		t.Fatalf("%d of 800 concurrent requests passed, want 50", passed.Load())
	}
	// conc-user was charged exactly 50: 50 more from a fresh address pass.
	n := 0
	for range 60 {
		if serve(t, h, "192.0.2.2", alice).passed {
			n++
		}
	}
	if n != 50 {
		t.Fatalf("conc-user had %d left after 50 passed, want 50", n)
	}
}
