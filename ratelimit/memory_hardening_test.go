package ratelimit

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
	"unsafe"
)

// TestEvictionNeverDropsLiveWhileExpiredHeld: a full shard holding one
// expired key and live, limited callers makes room by dropping the expired
// key, whenever the last sweep was. Before, inside the 100 ms between
// sweeps, the 8-key eviction sample usually missed the expired key and
// dropped a live one: a caller over its limit was let through.
func TestEvictionNeverDropsLiveWhileExpiredHeld(t *testing.T) {
	const perShard = 64
	ms := int64(time.Millisecond)
	// Hashes with the top 6 bits clear all land in shard 0.
	key := func(i int) uint64 { return uint64(i+1) * 0x9E3779B97F4A7C15 >> 6 }
	for trial := range 20 {
		z := tableZone("evict-order", perShard*shardCount, "1/s", 0)
		zs := []*zone{z}
		var out [1]outcome
		decide := func(h uint64, now int64) bool {
			return decideMemory(zs, []uint64{h}, now, out[:], nil, allZones)
		}
		t0 := int64(time.Hour)
		c, b := key(0), key(1)
		decide(c, t0)       // expires at t0+1s
		decide(b, t0+50*ms) // expires at t0+1.05s
		live := make([]uint64, 0, perShard-2)
		for i := range perShard - 2 {
			live = append(live, key(2+i))
			decide(key(2+i), t0+900*ms) // live until t0+1.9s
		}
		if n := len(z.table.shards[0].m); n != perShard {
			t.Fatalf("shard 0 holds %d keys, want it full with %d", n, perShard)
		}
		// c has expired: room is made (a sweep, before the fix).
		if !decide(key(1000), t0+1010*ms) {
			t.Fatal("new key rejected")
		}
		// b has expired too, 50 ms later.
		if !decide(key(1001), t0+1060*ms) {
			t.Fatal("new key rejected")
		}
		if ev := z.table.evictions.Load(); ev != 0 {
			t.Errorf("trial %d: %d live keys dropped while an expired one was held", trial, ev)
		}
		for i, h := range live {
			if decide(h, t0+1060*ms) {
				t.Fatalf("trial %d: live caller %d, over its limit, was let through: its key was dropped", trial, i)
			}
		}
	}
}

// TestShardIsOneCacheLine: shards sit in an array side by side; one per
// 64-byte line keeps their locks from sharing a line.
func TestShardIsOneCacheLine(t *testing.T) {
	if n := unsafe.Sizeof(shard{}); n != 64 {
		t.Fatalf("shard is %d bytes, want 64: adjust its padding", n)
	}
}

// TestRefusedConfigKeepsZoneBound: a config that shares a memory zone with
// the running one and sets a smaller max_keys changes nothing while it is
// only provisioned, nor after it is refused (its Cleanup runs, as Caddy
// does when a later module fails); the new bound applies once the running
// config is cleaned up, that is once the new one has replaced it.
func TestRefusedConfigKeepsZoneBound(t *testing.T) {
	const name = "refused-bound"
	c := &fakeClock{ns: int64(time.Hour)}
	running := provision(t, &Handler{Zones: []*Zone{{Name: name, Rate: "1/1h"}}, Store: &Store{Type: "memory", MaxKeys: 64 * 100}}, c)
	z := running.zones[0]
	fill := func(from, n int) {
		var out [1]outcome
		for i := range n {
			h := requestKey{text: "filler-" + strconv.Itoa(from+i)}.hash()
			decideMemory(running.zones, []uint64{h}, c.ns, out[:], nil, allZones)
		}
	}
	fill(0, 300)
	if !serve(t, running, "203.0.113.7", nil).passed {
		t.Fatal("victim's first request rejected")
	}
	if serve(t, running, "203.0.113.7", nil).passed {
		t.Fatal("victim's second request passed")
	}

	// The new config provisions (the zone is shared), then another module
	// fails and Caddy cleans up what it provisioned.
	ctx, cancel := newContext()
	refused := &Handler{Zones: []*Zone{{Name: name, Rate: "1/1h"}}, Store: &Store{Type: "memory", MaxKeys: 64}}
	refused.now = c.now
	if err := refused.Provision(ctx); err != nil {
		t.Fatalf("provision: %v", err)
	}
	fill(300, 300) // traffic while the new config is being loaded
	// Caddy cancels the refused config's context, which cleans up every
	// module it loaded; refused was provisioned directly, so by hand.
	_ = refused.Cleanup()
	cancel()
	fill(600, 300)

	if ev := z.table.evictions.Load(); ev != 0 {
		t.Errorf("the refused config's max_keys 64 took hold: %d live keys evicted, %d held", ev, z.table.len())
	}
	if n := z.table.len(); n != 901 {
		t.Errorf("zone holds %d keys, want all 901", n)
	}
	if serve(t, running, "203.0.113.7", nil).passed {
		t.Fatal("victim over its limit let through after a refused config")
	}

	// A config that does replace the running one: its bound applies once
	// the running one is cleaned up.
	ctx2, cancel2 := newContext()
	defer cancel2()
	next := provisionIn(t, ctx2, &Handler{Zones: []*Zone{{Name: name, Rate: "1/1h"}}, Store: &Store{Type: "memory", MaxKeys: 64}}, c)
	if ev := z.table.evictions.Load(); ev != 0 {
		t.Fatalf("bound applied before the running config was replaced: %d evictions", ev)
	}
	_ = running.Cleanup()
	var out [1]outcome
	// A shard shrinks when a key is inserted into it: 2000 reach all 64.
	for i := range 2000 {
		h := requestKey{text: "after-" + strconv.Itoa(i)}.hash()
		decideMemory(next.zones, []uint64{h}, c.ns, out[:], nil, allZones)
	}
	if n := z.table.len(); n > 64 {
		t.Fatalf("new config's max_keys 64 not applied after the old config's cleanup: %d keys held", n)
	}
}

// TestEvictionOrderRandomized checks the same rule against a brute-force
// scan of the shard, over random traffic: callers returning (their TAT
// moves on, with bursts), new callers, time jumps and max_keys changes.
// Whenever a new key needs room in a full shard that holds an expired key,
// no live key may be evicted.
func TestEvictionOrderRandomized(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 10))
	z := tableZone("evict-random", 64*24, "10/s", 5)
	zs := []*zone{z}
	var out [1]outcome
	now := int64(time.Hour)
	pool := make([]uint64, 5000)
	for i := range pool {
		pool[i] = rng.Uint64()
	}
	checked := 0
	for step := range 300_000 {
		switch r := rng.IntN(1000); {
		case r == 0:
			z.table.setMaxKeys(64 * (4 + rng.IntN(40)))
		case r < 300:
			now += rng.Int64N(int64(200 * time.Microsecond))
		}
		h := pool[rng.IntN(len(pool))]
		s := z.table.shard(h)
		_, exists := s.m[h]
		expired := 0
		for _, tat := range s.m {
			if tat <= now {
				expired++
			}
		}
		// Room for one more; after a max_keys cut, more than one.
		need := len(s.m) - int(z.table.perShard.Load()) + 1
		before := z.table.evictions.Load()
		decideMemory(zs, []uint64{h}, now, out[:], nil, allZones)
		if !exists && need > 0 && expired > 0 {
			checked++
			if ev := z.table.evictions.Load() - before; ev > uint64(max(0, need-expired)) {
				t.Fatalf("step %d: %d live keys evicted to make room for %d while the shard held %d expired", step, ev, need, expired)
			}
		}
	}
	// Both cases must have come up, or the test checks nothing.
	if checked < 1000 || z.table.evictions.Load() < 1000 {
		t.Fatalf("%d insertions into a full shard holding an expired key, %d evictions: want both >= 1000", checked, z.table.evictions.Load())
	}
}
