package ratelimit

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

const (
	// shardCount spreads keys over independent locks; a power of two.
	shardCount = 64
	// dueCap bounds how many keys nearest expiry a shard keeps in order.
	// A full shard finds its expired keys there without a sweep, and a
	// sweep (O(shard)) happens only once they are used up, so a flood of
	// fresh keys costs O(shard/dueCap) per request at most.
	dueCap = 256
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
	blocks    atomic.Int64 // names each charge_on key's blocks (chargeon.go)
}

type shard struct {
	mu sync.Mutex
	m  map[uint64]int64
	// due[head:] are keys in ascending order of a TAT recorded when they
	// were inserted or at the last sweep, each a lower bound of its key's
	// TAT (a TAT only grows, but when a charge is given back, which tracks
	// the lower TAT anew); an entry may be stale (its key dropped, or its
	// TAT moved on), which dropExpired finds out when it gets there.
	due  []dueEntry
	head int
	// rest is a lower bound of the TAT of every key without an entry in
	// due, and at least the last entry's: when no entry is due and now is
	// before rest, nothing in the shard has expired.
	rest int64
	// held is what charge_on zones' keys have given back (chargeon.go), by
	// key; nil in other zones. An entry goes with its key.
	held map[uint64]held
	// A shard is 64 bytes, one cache line: no false sharing.
}

// held is a charge_on key's current block (the run of charges since its
// TAT last passed) and how much it has given back in it.
type held struct {
	given int64
	block int64
}

type dueEntry struct {
	h   uint64
	tat int64
}

func newMemoryTable(maxKeys int) *memoryTable {
	t := &memoryTable{}
	for i := range t.shards {
		t.shards[i].m = make(map[uint64]int64)
		t.shards[i].rest = math.MaxInt64
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
//
// A new key also drops up to two expired ones when the shard is not full,
// so a table holds about its live keys rather than every key since it
// last filled: under a stream of one-off callers (a new key a request)
// the shard's map stays small and in cache instead of growing to max_keys
// and missing the cache on every lookup. It costs two comparisons when
// nothing has expired, and the same amortized O(shard/dueCap) as a full
// table's drops when something has.
func (t *memoryTable) store(s *shard, h uint64, tat, now int64, exists bool) {
	if !exists {
		limit := int(t.perShard.Load())
		for len(s.m) >= limit {
			if !s.dropExpired(now, limit) {
				s.evictOne()
				t.evictions.Add(1)
			}
		}
		for range 2 {
			if !s.dropExpired(now, limit) {
				break
			}
		}
		s.track(h, tat, limit)
	}
	s.m[h] = tat
}

// dropExpired drops one expired key, or every one if it takes a sweep, and
// reports whether the shard held any. It is exact: false means nothing in
// the shard has expired.
func (s *shard) dropExpired(now int64, limit int) bool {
	for s.head < len(s.due) && s.due[s.head].tat <= now {
		e := s.due[s.head]
		s.head++
		tat, ok := s.m[e.h]
		if !ok {
			continue
		}
		if tat <= now {
			s.drop(e.h)
			return true
		}
		s.track(e.h, tat, limit) // live: requests moved its TAT on
	}
	if now < s.rest {
		return false
	}
	// Every entry was used up, and a key without one may have expired.
	return s.sweep(now, limit) > 0
}

// track notes that h's TAT is at least tat: in due if it is among the
// dueCap smallest recorded, else by lowering rest.
func (s *shard) track(h uint64, tat int64, limit int) {
	if tat >= s.rest {
		return
	}
	capacity := max(1, min(dueCap, limit))
	for len(s.due)-s.head >= capacity {
		last := s.due[len(s.due)-1]
		if tat >= last.tat {
			s.rest = tat
			return
		}
		s.rest = last.tat
		s.due = s.due[:len(s.due)-1]
	}
	if s.head == len(s.due) {
		s.due, s.head = s.due[:0], 0
	} else if len(s.due) == cap(s.due) && s.head > 0 {
		s.due = s.due[:copy(s.due, s.due[s.head:])]
		s.head = 0
	}
	if s.due == nil {
		s.due = make([]dueEntry, 0, capacity)
	}
	// After any equal TAT, so entries of one instant stay first in, first out.
	i, n := s.head, len(s.due)
	for i < n {
		mid := int(uint(i+n) >> 1)
		if s.due[mid].tat <= tat {
			i = mid + 1
		} else {
			n = mid
		}
	}
	s.due = slices.Insert(s.due, i, dueEntry{h, tat})
}

// sweep drops every expired key, refills due with the keys nearest expiry
// and makes rest exact; it returns how many keys it dropped.
func (s *shard) sweep(now int64, limit int) int {
	s.due, s.head, s.rest = s.due[:0], 0, math.MaxInt64
	dropped := 0
	for k, tat := range s.m {
		if tat <= now {
			s.drop(k)
			dropped++
		} else {
			s.track(k, tat, limit)
		}
	}
	return dropped
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
	s.drop(victim)
}

// drop forgets key h.
func (s *shard) drop(h uint64) {
	delete(s.m, h)
	if s.held != nil {
		delete(s.held, h)
	}
}

// decideMemory decides one request across the active zones, all or
// nothing: the shards of every zone are locked (in zone order, so
// concurrent requests cannot deadlock), every zone is checked, and only if
// all allow is any TAT advanced (or slot taken, in a concurrent zone). A
// charge_on zone is charged up front like any other, and holds (one per
// zone, nil if the handler has no charge_on zone) receives what giving its
// charge back takes (chargeon.go). zones must be sorted by seq; out
// receives one outcome per active zone.
func decideMemory(zones []*zone, hashes []uint64, now int64, out []outcome, holds []hold, active zoneSet) bool {
	if len(zones) == 1 {
		if !active.has(0) {
			return true
		}
		var h *hold
		if holds != nil {
			h = &holds[0]
		}
		return decideOne(zones[0], hashes[0], now, &out[0], h)
	}
	var shards [maxZones]*shard
	var next [maxZones]int64
	var exists [maxZones]bool
	for i, z := range zones {
		if active.has(i) {
			shards[i] = z.table.shard(hashes[i])
			shards[i].mu.Lock()
		}
	}
	ok := true
	for i, z := range zones {
		if !active.has(i) {
			continue
		}
		var v int64
		v, exists[i] = shards[i].m[hashes[i]]
		if z.slots > 0 {
			out[i], next[i] = z.table.checkSlot(shards[i], z.slots, v, exists[i])
		} else {
			out[i], next[i] = z.limit.check(v, now)
		}
		ok = ok && out[i].allowed
	}
	if ok {
		for i, z := range zones {
			if !active.has(i) {
				continue
			}
			if z.slots > 0 {
				shards[i].m[hashes[i]] = next[i]
				out[i].after = next[i]
				continue
			}
			z.table.store(shards[i], hashes[i], next[i], now, exists[i])
			if z.chargeOn != nil {
				// after is 0 iff the stored TAT was not after now.
				holds[i] = z.table.hold(shards[i], hashes[i], out[i].after == 0, next[i], now)
			}
			out[i].after = next[i] - now
		}
	}
	for i := range zones {
		if active.has(i) {
			shards[i].mu.Unlock()
		}
	}
	return ok
}

// decideOne is decideMemory for the common single zone; hd is nil unless
// the handler has a charge_on zone.
func decideOne(z *zone, h uint64, now int64, out *outcome, hd *hold) bool {
	s := z.table.shard(h)
	s.mu.Lock()
	v, exists := s.m[h]
	if z.slots > 0 {
		o, next := z.table.checkSlot(s, z.slots, v, exists)
		if o.allowed {
			s.m[h] = next
			o.after = next
		}
		s.mu.Unlock()
		*out = o
		return o.allowed
	}
	o, next := z.limit.check(v, now)
	if o.allowed {
		z.table.store(s, h, next, now, exists)
		o.after = next - now
		if z.chargeOn != nil {
			*hd = z.table.hold(s, h, v <= now, next, now)
		}
	}
	s.mu.Unlock()
	*out = o
	return o.allowed
}

// A concurrent zone's table holds, per key, how many of its requests are
// in flight (at least 1; a key with none is deleted). Nothing in it
// expires or is evicted: a slot is only given up by the request holding
// it (releaseSlot), so a full shard refuses a new key instead, the strict
// side, which takes max_keys callers with requests in flight at once.

// checkSlot is the test for one more request of a key with inFlight
// requests in flight (the shard is locked): its outcome (after is the
// count, as RateLimit's r needs) and the count to store if it is taken.
func (t *memoryTable) checkSlot(s *shard, slots, inFlight int64, exists bool) (outcome, int64) {
	if !exists && len(s.m) >= int(t.perShard.Load()) {
		// No room for the key: none of its slots can be had, so r is 0.
		return outcome{after: slots, full: true}, inFlight + 1
	}
	return outcome{allowed: inFlight < slots, after: inFlight}, inFlight + 1
}

// releaseSlot gives back one slot of key h in a concurrent zone.
func releaseSlot(z *zone, h uint64) {
	s := z.table.shard(h)
	s.mu.Lock()
	if n := s.m[h]; n > 1 {
		s.m[h] = n - 1
	} else {
		delete(s.m, h)
	}
	s.mu.Unlock()
}

// hold records a charge_on key's up-front charge, to next (the shard is
// locked), and returns what giving it back takes. A key whose TAT had
// passed (passed; or that was not held) starts a new block: everything
// charged before has been used up by time, so nothing given back since
// counts.
func (t *memoryTable) hold(s *shard, h uint64, passed bool, next, now int64) hold {
	if s.held == nil {
		s.held = make(map[uint64]held)
	}
	e, ok := s.held[h]
	if !ok || passed {
		e = held{block: t.blocks.Add(1)}
		s.held[h] = e
	}
	return hold{tat: next, given: e.given, block: e.block}
}

// refundMemory gives back what is left of one request's up-front charge to
// h in a charge_on zone (see limit.giveBack), unless the key has started a
// new block since, or been dropped.
func refundMemory(z *zone, h uint64, hd hold, now int64) {
	s := z.table.shard(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	tat, ok := s.m[h]
	e, held := s.held[h]
	if !ok || !held || e.block != hd.block {
		return
	}
	r := z.limit.giveBack(tat, e.given, hd, now)
	if r == 0 {
		return
	}
	tat -= r
	e.given += r
	s.m[h], s.held[h] = tat, e
	// Expiry tracking wants a lower bound of each TAT: this one went down.
	s.track(h, tat, int(z.table.perShard.Load()))
}
