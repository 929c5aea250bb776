package ratelimit

import (
	"testing"
	"time"
)

// oneOffTraffic runs n requests of distinct callers, 30 µs apart (about
// what one Caddy core serves), through zone z whose keys expire 1 µs after
// their request (rate 1000000/s): bench-compare.sh's throttle row, where
// wrk's callers are random addresses.
func oneOffTraffic(z *zone, start uint64, n int, now int64) int64 {
	zs := []*zone{z}
	var out [1]outcome
	var h [1]uint64
	for i := range n {
		h[0] = (start + uint64(i)) * 0x9E3779B97F4A7C15
		decideMemory(zs, h[:], now, out[:], nil, allZones)
		now += int64(30 * time.Microsecond)
	}
	return now
}

// TestMemoryHoldsLiveKeys: a table fed one-off callers, each expired by
// the next request, holds about the keys that are live (none here) plus
// what its expiry tracking has not reached yet, not every key since it
// last filled: before, it grew to max_keys (1,000,000) and kept them.
func TestMemoryHoldsLiveKeys(t *testing.T) {
	z := tableZone("one-off", defaultMaxKeys, "1000000/s", 1000000)
	oneOffTraffic(z, 0, 200_000, int64(time.Hour))
	if n := z.table.len(); n > 200_000/10 {
		t.Errorf("after 200000 one-off callers, all expired, the table holds %d keys: want at most 20000", n)
	}
}

// BenchmarkMemoryOneOffCallers is one decision for a new caller each
// request (a table fed one-off callers for 2M requests first, as wrk's
// random callers feed it in a run): the map access that misses the cache
// once the table has grown is the cost.
func BenchmarkMemoryOneOffCallers(b *testing.B) {
	z := tableZone("bench-one-off", defaultMaxKeys, "1000000/s", 1000000)
	now := oneOffTraffic(z, 0, 2_000_000, int64(time.Hour))
	zs := []*zone{z}
	var out [1]outcome
	var h [1]uint64
	i := uint64(2_000_000)
	b.ReportAllocs()
	for b.Loop() {
		h[0] = i * 0x9E3779B97F4A7C15
		decideMemory(zs, h[:], now, out[:], nil, allZones)
		now += int64(30 * time.Microsecond)
		i++
	}
}
