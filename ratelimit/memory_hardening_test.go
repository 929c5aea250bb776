package ratelimit

import (
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
			return decideMemory(zs, []uint64{h}, now, out[:])
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
