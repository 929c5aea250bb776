package ratelimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func tableZone(name string, maxKeys int, rate string, burst int64) *zone {
	r, err := parseRate(rate)
	if err != nil {
		panic(err)
	}
	return &zone{name: name, rate: r, limit: newLimit(r, burst), table: newMemoryTable(maxKeys)}
}

// TestMemoryBoundUnderFlood: a flood of distinct (spoofed) keys never makes
// the table hold more than max_keys.
func TestMemoryBoundUnderFlood(t *testing.T) {
	const maxKeys = 10_000
	z := tableZone("flood", maxKeys, "10/1m", 5)
	zs := []*zone{z}
	var out [1]outcome
	now := int64(time.Hour)
	for i := range 20 * maxKeys {
		k := requestKey{text: "spoofed-" + strconv.Itoa(i)}
		if !decideMemory(zs, []uint64{k.hash()}, now, out[:], nil, allZones) {
			t.Fatalf("fresh key %d rejected", i)
		}
		now += int64(time.Microsecond)
	}
	perShard := (maxKeys + shardCount - 1) / shardCount
	if n := z.table.len(); n > perShard*shardCount || n < maxKeys*9/10 {
		t.Fatalf("table holds %d keys, want about %d and never above %d", n, maxKeys, perShard*shardCount)
	}
	for i := range z.table.shards {
		if n := len(z.table.shards[i].m); n > perShard {
			t.Fatalf("shard %d holds %d keys, bound %d", i, n, perShard)
		}
	}
	if z.table.evictions.Load() == 0 {
		t.Fatal("a flood of live keys evicted nothing")
	}
}

// TestMemoryDropsExpiredFirst: when full, keys whose time is up make room
// and no live key is dropped, so every decision stays exact.
func TestMemoryDropsExpiredFirst(t *testing.T) {
	const maxKeys = 6400
	z := tableZone("expiry", maxKeys, "1/s", 0)
	zs := []*zone{z}
	var out [1]outcome
	now := int64(time.Hour)
	hash := func(i int) uint64 { return requestKey{text: "k" + strconv.Itoa(i)}.hash() }
	// Old keys fill the table, then expire (TAT = t0 + 1s).
	for i := range maxKeys / 2 {
		decideMemory(zs, []uint64{hash(i)}, now, out[:], nil, allZones)
	}
	now += int64(2 * time.Second)
	// Live keys; each shard is about half full after this.
	live := maxKeys / 4
	for i := range live {
		decideMemory(zs, []uint64{hash(maxKeys + i)}, now, out[:], nil, allZones)
	}
	// More new keys than free room: only expired keys may go.
	for i := range maxKeys / 5 {
		decideMemory(zs, []uint64{hash(2*maxKeys + i)}, now, out[:], nil, allZones)
	}
	if ev := z.table.evictions.Load(); ev != 0 {
		t.Fatalf("%d live keys dropped while expired ones were there", ev)
	}
	// Every live key is still limited (1/s, no burst): all rejected now.
	for i := range live {
		if decideMemory(zs, []uint64{hash(maxKeys + i)}, now, out[:], nil, allZones) {
			t.Fatalf("live key %d was forgotten", i)
		}
	}
}

// TestReloadKeepsStateAndAppliesNewRate (strict spacing, burst 0): a new config generation finds the
// zone's keys by name, and its new rate applies to them.
func TestReloadKeepsStateAndAppliesNewRate(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	old := memoryHandler(t, c, &Zone{Name: "reload", Rate: "2/1m", Burst: new(int64(0))})
	for range 2 {
		serve(t, old, "192.0.2.1", nil)
	}
	if serve(t, old, "192.0.2.1", nil).passed {
		t.Fatal("old config: third request passed")
	}
	// New generation, new rate: 2/1m -> 4/1m. The key has TAT now+60s,
	// new interval 15s, tolerance 0: not allowed until 45s have passed.
	next := memoryHandler(t, c, &Zone{Name: "reload", Rate: "4/1m", Burst: new(int64(0))})
	_ = old.Cleanup() // as Caddy does once the new config runs
	if serve(t, next, "192.0.2.1", nil).passed {
		t.Fatal("state was lost on reload: caller got a fresh budget")
	}
	c.ns += int64(45 * time.Second)
	if !serve(t, next, "192.0.2.1", nil).passed {
		t.Fatal("new rate not applied: still rejected after 45s")
	}
	if serve(t, next, "192.0.2.1", nil).passed {
		t.Fatal("new rate: second request within 15s passed")
	}
}

// TestConflictingZoneRefused: one config may not define a zone twice
// differently; a later config may redefine it.
func TestConflictingZoneRefused(t *testing.T) {
	ctx, cancel := newContext()
	defer cancel()
	a := &Handler{Zones: []*Zone{{Name: "shared", Rate: "10/s"}}}
	provisionIn(t, ctx, a, nil)
	same := &Handler{Zones: []*Zone{{Name: "shared", Rate: "10/s"}}}
	provisionIn(t, ctx, same, nil)
	if same.zones[0].table != a.zones[0].table {
		t.Fatal("two handlers naming one zone do not share its keys")
	}
	b := &Handler{Zones: []*Zone{{Name: "shared", Rate: "20/s"}}}
	err := b.Provision(ctx)
	if err == nil {
		t.Fatal("conflicting definition of zone accepted")
	}
	_ = b.Cleanup()
	want := `throttle: zone "shared" is defined twice differently`
	if len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Fatalf("error %q, want it to start with %q", err, want)
	}
	provision(t, &Handler{Zones: []*Zone{{Name: "shared", Rate: "20/s"}}}, nil)
}

func TestValidateRefuses(t *testing.T) {
	for _, tc := range []struct {
		h    Handler
		want string
	}{
		{Handler{}, "throttle: no zone"},
		{Handler{Zones: []*Zone{{Name: "z", Rate: "0/s"}}}, `throttle: zone "z": rate "0/s": request count must be`},
		{Handler{Zones: []*Zone{{Name: "z", Rate: "-5/s"}}}, `throttle: zone "z": rate "-5/s"`},
		{Handler{Zones: []*Zone{{Name: "z", Rate: "5/0s"}}}, `throttle: zone "z": rate "5/0s": duration must be positive`},
		{Handler{Zones: []*Zone{{Name: "z"}}}, `throttle: zone "z": rate is required`},
		{Handler{Zones: []*Zone{{Name: "z", Rate: "1/s", IPv4Prefix: 33}}}, `throttle: zone "z": ipv4_prefix 33: must be 1..32`},
		{Handler{Zones: []*Zone{{Name: "z", Rate: "1/s", IPv6Prefix: 129}}}, `throttle: zone "z": ipv6_prefix 129: must be 1..128`},
		{Handler{Zones: []*Zone{{Name: "z", Rate: "1/s", IPv6Prefix: -1}}}, `throttle: zone "z": ipv6_prefix -1`},
		{Handler{Zones: []*Zone{{Name: "z", Rate: "1/s", Burst: new(int64(-1))}}}, `throttle: zone "z": burst -1`},
		{Handler{Zones: []*Zone{{Name: "z", Rate: "1/s", Key: "{oops"}}}, `throttle: zone "z": key "{oops": placeholder at 0 is not closed`},
		{Handler{Zones: []*Zone{{Name: "z", Rate: "1/s"}, {Name: "z", Rate: "2/s"}}}, `throttle: zone "z" declared twice in one handler`},
		{Handler{Zones: []*Zone{{Name: "z", Rate: "1/s"}}, Store: &Store{Type: "disk"}}, `throttle: store "disk": must be memory or redis`},
		{Handler{Zones: []*Zone{{Name: "z", Rate: "1/s"}}, Store: &Store{Type: "redis"}}, `throttle: store redis: address is required`},
		{Handler{Zones: []*Zone{{Name: "z", Rate: "1/s"}}, Store: &Store{Type: "redis", Redis: &RedisStore{Address: "127.0.0.1:1", OnError: "maybe"}}}, `throttle: store redis: on_error "maybe"`},
		{Handler{Zones: []*Zone{{Name: "z", Rate: "1/s"}}, Mode: "dry"}, `throttle: mode "dry"`},
		{Handler{Zones: []*Zone{{Name: "z", Rate: "1/s"}}, Status: 200}, `throttle: status 200`},
		{Handler{Zones: nineZones()}, `throttle: 9 zones: at most 8 per handler`},
	} {
		ctx, cancel := newContext()
		h := tc.h
		err := h.Provision(ctx)
		_ = h.Cleanup()
		cancel()
		if err == nil || len(err.Error()) < len(tc.want) || err.Error()[:len(tc.want)] != tc.want {
			t.Errorf("%+v: error %v, want %q...", tc.h, err, tc.want)
		}
	}
}

// BenchmarkMemoryDecision is one memory-store decision (shard lock, GCRA,
// store) for working sets of 1k and 64k callers, serial and parallel; the
// target is <= 100 ns and 0 allocations. key+decision adds the default
// key's cost: parse the client_ip string, cut to /64, hash.
func BenchmarkMemoryDecision(b *testing.B) {
	for _, callers := range []int{1 << 10, 1 << 16} {
		hashes := make([]uint64, callers)
		for i := range hashes {
			hashes[i] = requestKey{text: "caller-" + strconv.Itoa(i)}.hash()
		}
		mask := callers - 1
		b.Run("serial/callers="+strconv.Itoa(callers), func(b *testing.B) {
			zs := []*zone{tableZone("bench-serial", defaultMaxKeys, "1000/s", 1000)}
			var out [1]outcome
			now := monotonicNow()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				decideMemory(zs, hashes[i&mask:][:1], now+int64(i)*100, out[:], nil, allZones)
				i++
			}
		})
		b.Run("parallel/callers="+strconv.Itoa(callers), func(b *testing.B) {
			zs := []*zone{tableZone("bench-parallel", defaultMaxKeys, "1000/s", 1000)}
			var seed atomic.Uint64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var out [1]outcome
				i := int(seed.Add(7919))
				now := monotonicNow()
				for pb.Next() {
					decideMemory(zs, hashes[i&mask:][:1], now+int64(i)*100, out[:], nil, allZones)
					i++
				}
			})
		})
	}
	b.Run("key+decision/callers=1024", func(b *testing.B) {
		z := tableZone("bench-key", defaultMaxKeys, "1000/s", 1000)
		z.key = keyTemplate{clientIP: true, v4bits: 32, v6bits: 64}
		zs := []*zone{z}
		ips := make([]string, 1024)
		for i := range ips {
			ips[i] = "2001:db8:" + strconv.FormatInt(int64(i), 16) + "::1"
		}
		var out [1]outcome
		var h [1]uint64
		now := monotonicNow()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			h[0] = z.key.fromString(ips[i&1023]).hash()
			decideMemory(zs, h[:], now+int64(i)*100, out[:], nil, allZones)
			i++
		}
	})
}

// BenchmarkMemoryBytesPerKey fills a zone with 1M distinct keys and
// reports the heap it grew by per key.
func BenchmarkMemoryBytesPerKey(b *testing.B) {
	const keys = 1_000_000
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		z := tableZone("bench-bytes", keys, "1/s", 0)
		zs := []*zone{z}
		var out [1]outcome
		now := monotonicNow()
		for i := range keys {
			decideMemory(zs, []uint64{uint64(i) * 0x9E3779B97F4A7C15}, now, out[:], nil, allZones)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if n := z.table.len(); n < keys*99/100 {
			b.Fatalf("table holds %d of %d keys", n, keys)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/keys, "bytes/key")
		runtime.KeepAlive(z)
	}
}

func nineZones() []*Zone {
	zs := make([]*Zone, 9)
	for i := range zs {
		zs[i] = &Zone{Name: "z" + strconv.Itoa(i), Rate: "1/s"}
	}
	return zs
}

// BenchmarkMemoryFlood floods a zone bounded at 200k keys with distinct
// live keys (every one a new spoofed caller) and reports what the table
// holds and the heap it uses: both stay at the bound however long the
// flood, and ns/op is the cost of admitting a new key into a full table.
func BenchmarkMemoryFlood(b *testing.B) {
	const maxKeys = 200_000
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	z := tableZone("bench-flood", maxKeys, "1/1h", 0)
	zs := []*zone{z}
	var out [1]outcome
	var h [1]uint64
	now := monotonicNow()
	i := uint64(0)
	for range 3 * maxKeys { // fill first: the benchmark measures a full table
		h[0] = i * 0x9E3779B97F4A7C15
		decideMemory(zs, h[:], now, out[:], nil, allZones)
		i++
	}
	b.ReportAllocs()
	for b.Loop() {
		h[0] = i * 0x9E3779B97F4A7C15
		decideMemory(zs, h[:], now, out[:], nil, allZones)
		i++
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := z.table.len(); n > maxKeys+shardCount {
		b.Fatalf("table holds %d keys, bound %d", n, maxKeys)
	}
	b.ReportMetric(float64(z.table.len()), "keys")
	b.ReportMetric(float64(i), "flood-keys")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MB")
	runtime.KeepAlive(z)
}

// BenchmarkHandler is what throttle adds to one request in Caddy: key from
// client_ip, memory decision, both RateLimit headers, counters. Compare
// with Caddy's own cost per request (tens of µs) for the end-to-end share.
// two-zones-one-key is the usual short-burst plus sustained limit on one
// caller: the key is derived once for both zones. charge-on adds the
// response writer wrapper and the charge after the response; concurrent is
// a concurrent zone's cost in the same run, rate+concurrent both kinds on
// one caller.
func BenchmarkHandler(b *testing.B) {
	for _, bc := range []struct {
		name  string
		zones []*Zone
	}{
		{"one-zone", []*Zone{{Name: "bench-handler", Rate: "1000000/s", Burst: new(int64(100))}}},
		{"two-zones-one-key", []*Zone{{Name: "bench-handler-burst", Rate: "1000000/s", Burst: new(int64(100))}, {Name: "bench-handler-sustained", Rate: "1000000/s", Burst: new(int64(50))}}},
		// charge_on: the check, the wrapped writer, and a charge (next
		// answers 200, charged here so the charge's cost is in).
		{"charge-on", []*Zone{{Name: "bench-handler-charge", Rate: "1000000/s", Burst: new(int64(100)), ChargeOn: &ChargeOn{Status: []int{200}}}}},
		// concurrent: a slot taken at the decision and given back when
		// next returns (a second shard lock), beside one-zone's rate.
		{"concurrent", []*Zone{{Name: "bench-handler-concurrent", Concurrent: 100}}},
		{"rate+concurrent", []*Zone{{Name: "bench-handler-rc-rate", Rate: "1000000/s", Burst: new(int64(100))}, {Name: "bench-handler-rc-conc", Concurrent: 100}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			// The clock advances 1µs a request, the rate's interval: never hit.
			c := &fakeClock{ns: int64(time.Hour)}
			h := provision(b, &Handler{Zones: bc.zones}, c)
			r := httptest.NewRequest("GET", "http://example.com/", nil)
			vars := map[string]any{caddyhttp.ClientIPVarKey: "2001:db8::1"}
			r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
			caddyhttp.NewTestReplacer(r)
			w := httptest.NewRecorder()
			next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
			b.ReportAllocs()
			for b.Loop() {
				c.ns += int64(time.Microsecond)
				if err := h.ServeHTTP(w, r, next); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
