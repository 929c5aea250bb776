package ratelimit

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// shardCount spreads keys over independent locks; a power of two.
	shardCount = 64
	// sweepGap is the least time between two full sweeps of one shard, so a
	// flood of fresh keys costs O(1) per request, not O(shard).
	sweepGap = int64(100 * time.Millisecond)
	// evictSample is how many entries are looked at to pick the one to
	// drop when a shard is full and holds nothing expired.
	evictSample = 8
)

// memoryTable is one zone's keys in process memory: TATs in nanoseconds of
// the process's monotonic clock, sharded by key hash, bounded by maxKeys.
type memoryTable struct {
	shards    [shardCount]shard
	perShard  atomic.Int64
	evictions atomic.Uint64
}

type shard struct {
	mu sync.Mutex
	m  map[uint64]int64
	// earliest is a lower bound of every TAT in m: until now reaches it,
	// nothing in m has expired and a sweep would find nothing.
	earliest  int64
	nextSweep int64
	_         [32]byte // one shard per 64-byte cache line: no false sharing
}

func newMemoryTable(maxKeys int) *memoryTable {
	t := &memoryTable{}
	for i := range t.shards {
		t.shards[i].m = make(map[uint64]int64)
		t.shards[i].earliest = math.MaxInt64
	}
	t.setMaxKeys(maxKeys)
	return t
}

// setMaxKeys changes the bound; a table that is now over it shrinks as keys
// are inserted.
func (t *memoryTable) setMaxKeys(maxKeys int) {
	t.perShard.Store(int64(max(1, (maxKeys+shardCount-1)/shardCount)))
}

func (t *memoryTable) shard(h uint64) *shard { return &t.shards[h>>58] }

// len counts the keys held.
func (t *memoryTable) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// store records tat for h, first making room if the shard is full: expired
// keys go first (forgetting them changes no decision); only if none has
// expired is the live key nearest expiry, among a small sample, dropped.
func (t *memoryTable) store(s *shard, h uint64, tat, now int64, exists bool) {
	if !exists {
		limit := int(t.perShard.Load())
		if len(s.m) >= limit && now >= s.earliest && now >= s.nextSweep {
			s.sweep(now)
		}
		for len(s.m) >= limit {
			s.evictOne()
			t.evictions.Add(1)
		}
		s.earliest = min(s.earliest, tat)
	}
	s.m[h] = tat
}

// sweep drops every expired key and makes earliest exact again.
func (s *shard) sweep(now int64) {
	earliest := int64(math.MaxInt64)
	for k, tat := range s.m {
		if tat <= now {
			delete(s.m, k)
		} else {
			earliest = min(earliest, tat)
		}
	}
	s.earliest = earliest
	s.nextSweep = now + sweepGap
}

// evictOne drops the key with the smallest TAT among a few: map iteration
// starts at a random place, so this is a random sample.
func (s *shard) evictOne() {
	var victim uint64
	least := int64(math.MaxInt64)
	n := 0
	for k, tat := range s.m {
		if tat < least {
			victim, least = k, tat
		}
		if n++; n == evictSample {
			break
		}
	}
	delete(s.m, victim)
}

// decideMemory decides one request across zones, all or nothing: the shards
// of every zone are locked (in zone order, so concurrent requests cannot
// deadlock), every zone is checked, and only if all allow is any TAT
// advanced. zones must be sorted by seq; out receives one outcome per zone.
func decideMemory(zones []*zone, hashes []uint64, now int64, out []outcome) bool {
	if len(zones) == 1 {
		return decideOne(zones[0], hashes[0], now, &out[0])
	}
	var shards [maxZones]*shard
	var next [maxZones]int64
	var exists [maxZones]bool
	for i, z := range zones {
		shards[i] = z.table.shard(hashes[i])
		shards[i].mu.Lock()
	}
	ok := true
	for i, z := range zones {
		var tat int64
		tat, exists[i] = shards[i].m[hashes[i]]
		out[i], next[i] = z.limit.check(tat, now)
		ok = ok && out[i].allowed
	}
	if ok {
		for i, z := range zones {
			z.table.store(shards[i], hashes[i], next[i], now, exists[i])
			out[i].after = next[i] - now
		}
	}
	for i := range zones {
		shards[i].mu.Unlock()
	}
	return ok
}

// decideOne is decideMemory for the common single zone.
func decideOne(z *zone, h uint64, now int64, out *outcome) bool {
	s := z.table.shard(h)
	s.mu.Lock()
	tat, exists := s.m[h]
	o, next := z.limit.check(tat, now)
	if o.allowed {
		z.table.store(s, h, next, now, exists)
		o.after = next - now
	}
	s.mu.Unlock()
	*out = o
	return o.allowed
}
