package clientip

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// The origin's record of the assertions it has accepted, so that each is
// used once. An assertion travels in a request header, and request headers
// are logged: Caddy's access log at the origin records them as received,
// and the PoP's reverse_proxy logs them with upstream errors ("aborting
// with incomplete response"). Whoever reads such a line could present the
// assertion again on its own request until max_age has passed; remembering
// every accepted assertion until then makes a second use a refusal
// (assertion_replayed), so a logged assertion is one already spent.
//
// An assertion is remembered by the first 128 bits of its MAC, which no one
// without the key can choose, until its signing time is max_age old (an
// older one is refused as expired before the record is consulted). Entries
// are kept in generations by signing time, each covering `width` seconds:
// a generation is dropped whole once all it can hold has expired, so
// forgetting costs nothing per entry. The record is split into shards by
// key, each with its own lock, so verifying requests in parallel do not
// queue on one mutex.
//
// The record outlives config reloads (replayRecords): a reload that forgot
// which assertions were used would make every logged one good again.
//
// Memory is bounded by size entries (replay_cache_size). A full record
// refuses further assertions (assertion_replay_cache_full) rather than
// forget ones that are still valid: an assertion that cannot be proven
// unused is not believed. A generation's map keeps its capacity when it is
// recycled (no allocation per request once warm), unless it held more than
// twice its share, so what stays allocated is bounded by about three times
// size entries.
type replayCache struct {
	full     logThrottle // the log line about refusals while full
	shards   [replayShards]replayShard
	width    int64 // seconds of signing time per generation
	perShard int   // entries a shard may hold
	keepMax  int   // a recycled generation larger than this is freed, not cleared
}

const (
	replayShards = 64
	// replayGens generations per shard, of which at most replayGens-1 can
	// hold assertions still within max_age (see newReplayCache).
	replayGens = 10

	defaultReplayCacheSize = 1_000_000
	minReplayCacheSize     = 1024
	maxReplayCacheSize     = 16_000_000
)

type replayShard struct {
	mu   sync.Mutex
	gens [replayGens]replayGen
	n    int      // entries in all gens
	_    [64]byte // keep neighbouring shards' locks off one cache line
}

type replayGen struct {
	id  int64 // signing time / width; -1 when never used
	set map[replayKey]struct{}
}

type replayKey [2]uint64

// newReplayCache sizes generations so that every assertion still
// acceptable at some instant (signed within max_age before it, or up to
// futureSkew after) lies in one of replayGens-1 consecutive generations:
// then two acceptable assertions never share a slot unless they share a
// generation, and a slot whose generation differs holds only expired ones.
func newReplayCache(maxAge time.Duration, size int) *replayCache {
	span := int64((maxAge + futureSkew + time.Second - 1) / time.Second) // seconds, rounded up
	width := max(1, (span+replayGens-3)/(replayGens-2))                  // (replayGens-2)*width >= span
	perShard := (size + replayShards - 1) / replayShards
	c := &replayCache{width: width, perShard: perShard, keepMax: 2 * perShard / (replayGens - 1)}
	for i := range c.shards {
		for j := range c.shards[i].gens {
			c.shards[i].gens[j].id = -1
		}
	}
	return c
}

// replayRecords holds each record across config reloads, by its settings:
// Caddy provisions the new config while the old one still serves, so the
// new handlers take over the record the old ones filled. Handlers with the
// same max_age and replay_cache_size share one, so an assertion used at one
// of them is used at all.
var replayRecords = caddy.NewUsagePool()

func (*replayCache) Destruct() error { return nil }

// acquireReplayCache returns the shared record for these settings and the
// key to release it by.
func acquireReplayCache(maxAge time.Duration, size int) (*replayCache, string, error) {
	key := fmt.Sprintf("max_age %d, size %d", maxAge, size)
	v, _, err := replayRecords.LoadOrNew(key, func() (caddy.Destructor, error) {
		return newReplayCache(maxAge, size), nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("client_ip: verify: the record of used assertions: %w", err)
	}
	return v.(*replayCache), key, nil
}

// keyOf is the record's key for a MAC.
func keyOf(mac []byte) replayKey {
	return replayKey{binary.LittleEndian.Uint64(mac[0:8]), binary.LittleEndian.Uint64(mac[8:16])}
}

// use records the assertion with MAC key signed at t (Unix seconds),
// verified at now, where oldest is the earliest signing time max_age still
// accepts. It returns reasonNone the first time, reasonAssertionReplayed
// after, and reasonAssertionReplayCacheFull when the record holds as many
// valid assertions as it may.
func (c *replayCache) use(key replayKey, t, oldest int64) reason {
	sh := &c.shards[key[0]%replayShards]
	g := t / c.width
	slot := &sh.gens[g%replayGens]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if slot.id != g {
		c.recycle(sh, slot, g)
	}
	if _, seen := slot.set[key]; seen {
		return reasonAssertionReplayed
	}
	if sh.n >= c.perShard {
		c.expire(sh, oldest)
		if sh.n >= c.perShard {
			return reasonAssertionReplayCacheFull
		}
	}
	if slot.set == nil {
		slot.set = make(map[replayKey]struct{})
	}
	slot.set[key] = struct{}{}
	sh.n++
	return reasonNone
}

// recycle empties slot for generation g.
func (c *replayCache) recycle(sh *replayShard, slot *replayGen, g int64) {
	sh.n -= len(slot.set)
	if len(slot.set) > c.keepMax {
		slot.set = nil // a burst's capacity is not kept for ever
	} else {
		clear(slot.set)
	}
	slot.id = g
}

// expire recycles every generation of sh whose newest signing time is
// before oldest.
func (c *replayCache) expire(sh *replayShard, oldest int64) {
	for i := range sh.gens {
		slot := &sh.gens[i]
		if slot.id >= 0 && (slot.id+1)*c.width-1 < oldest && len(slot.set) > 0 {
			c.recycle(sh, slot, slot.id)
		}
	}
}

// oldestAccepted is the earliest signing time (Unix seconds) an assertion
// may have at now and still be within maxAge.
func oldestAccepted(now time.Time, maxAge time.Duration) int64 {
	ns := now.Add(-maxAge).UnixNano()
	s := ns / int64(time.Second)
	if ns > s*int64(time.Second) { // round up; ns >= 0 for any clock after 1970
		s++
	}
	return s
}
