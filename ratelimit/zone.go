package ratelimit

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
)

// maxZones is how many zones one handler may check per request; the
// decision keeps per-zone state in fixed arrays so it does not allocate.
const maxZones = 8

// Zone is one named limit. Zones are per Caddy process: handlers naming the
// same zone share its keys, and a reload finds them again by name.
type Zone struct {
	// Name of the zone, unique per handler; shared by name across handlers.
	Name string `json:"name,omitempty"`
	// Key is a placeholder template naming the caller; default
	// `{http.vars.client_ip}` (the Caddyfile's `{client_ip}`).
	Key string `json:"key,omitempty"`
	// Rate is `<n>/<duration>`, e.g. `100/1m` or `10/s`: a bucket of n,
	// refilled at n per duration. Required unless Concurrent is set.
	Rate string `json:"rate,omitempty"`
	// Concurrent, instead of Rate, limits how many requests of one key may
	// be in flight at once (memory store only). A slot is held from the
	// decision until the request ends, however it ends.
	Concurrent int64 `json:"concurrent,omitempty"`
	// Burst is how many requests beyond the first may arrive at once;
	// default n-1 for `rate n/T`, a bucket of n (up to n at once, refilled
	// at n per T). 0 is strict spacing: one request per T/n.
	Burst *int64 `json:"burst,omitempty"`
	// IPv4Prefix groups IPv4 keys by this many leading bits; default 32.
	IPv4Prefix int `json:"ipv4_prefix,omitempty"`
	// IPv6Prefix groups IPv6 keys by this many leading bits; default 64,
	// so one IPv6 customer (a /64) is one caller.
	IPv6Prefix int `json:"ipv6_prefix,omitempty"`
	// ChargeOn, if set, charges a request only when its response matches;
	// a caller over the limit is still refused up front.
	ChargeOn *ChargeOn `json:"charge_on,omitempty"`
	// OnEmptyKey is what happens to a request whose key expands to
	// nothing (every placeholder in it empty), which would otherwise put
	// all such callers in one budget: `client_ip` (default) keys it on the
	// caller's address, `skip` leaves it out of this zone, `deny` rejects
	// it. Counted in caddy_throttle_empty_keys_total.
	OnEmptyKey OnEmptyKey `json:"on_empty_key,omitempty"`
}

// zone is a Zone compiled for one handler: its own limits, its key, and
// the shared state found by name.
type zone struct {
	name     string
	seq      uint64
	key      keyTemplate
	rate     rate
	burst    int64
	limit    limit
	slots    int64        // concurrent zones: requests in flight per key; 0 for rate zones
	rule     string       // what refuses, as configured: "rate 10/1m burst 9", "concurrent 5"
	table    *memoryTable // memory store only
	state    *zoneState
	owner    any    // the config generation that claimed it
	chargeOn []int  // charge_on statuses; nil: charged up front
	quoted   string // name as an sf-string
	reject   error
	counters zoneCounters
	// warnedEmpty: this zone's key was found empty once and said so.
	warnedEmpty atomic.Bool
}

// zones holds every zone's shared state by name, across config reloads.
var zones = caddy.NewUsagePool()

var zoneSeq atomic.Uint64

// zoneState is what outlives a config: its memory keys and the definition
// it was given by the config being loaded, to refuse a conflicting one.
type zoneState struct {
	seq   uint64
	mu    sync.Mutex
	owner any // the config generation that defined it last
	def   string
	table *memoryTable
	// slots are a concurrent zone's keys (requests in flight per key),
	// apart from table: a reload may turn a zone from one kind into the
	// other, and a TAT is no count.
	slots *memoryTable
	// bounds is the max_keys each config generation holding the memory
	// zone asked for; the table has the bound of applied, the generation
	// that serves traffic. A new generation's bound waits until that one is
	// cleaned up: Caddy provisions a new config while the old one runs, and
	// a config refused after this zone was provisioned must change nothing.
	bounds  map[any]*genBound
	applied any
}

// genBound is one config generation's max_keys for a zone and how many of
// its handlers hold the zone.
type genBound struct {
	maxKeys int
	refs    int
	seq     uint64 // order of first claim: the newest generation is next
}

var boundSeq atomic.Uint64

func (*zoneState) Destruct() error { return nil }

// definition is what two handlers of one config must agree on to share a
// zone.
func (z *zone) definition(store string) string {
	return fmt.Sprintf("key %s, %s, ipv4_prefix %d, ipv6_prefix %d, charge_on status %v, on_empty_key %s, store %s",
		z.key.template, z.rule, z.key.v4bits, z.key.v6bits, z.chargeOn, z.key.onEmpty, store)
}

// claim attaches z to the zone's shared state. Within one config (owner) a
// zone must be defined the same way everywhere; a new config may change it,
// and its new rate then applies to the keys already held.
func (z *zone) claim(owner any, store string, maxKeys int) error {
	v, _, err := zones.LoadOrNew(z.name, func() (caddy.Destructor, error) {
		return &zoneState{seq: zoneSeq.Add(1)}, nil
	})
	if err != nil {
		return err
	}
	st := v.(*zoneState)
	def := z.definition(store)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.owner == owner && st.def != def {
		_, _ = zones.Delete(z.name)
		return fmt.Errorf("zone %q is defined twice differently (%s) vs (%s): give one of them another name", z.name, st.def, def)
	}
	st.owner, st.def = owner, def
	if maxKeys > 0 {
		if z.slots > 0 {
			if st.slots == nil {
				st.slots = newMemoryTable(maxKeys)
			}
			z.table = st.slots
		} else {
			if st.table == nil {
				st.table = newMemoryTable(maxKeys)
			}
			z.table = st.table
		}
		st.claimBound(owner, maxKeys)
	}
	z.state, z.seq, z.owner = st, st.seq, owner
	return nil
}

// claimBound records owner's max_keys (the last of its handlers sets it)
// and applies it only if no other generation is serving with this zone.
func (st *zoneState) claimBound(owner any, maxKeys int) {
	if st.bounds == nil {
		st.bounds = make(map[any]*genBound)
	}
	b := st.bounds[owner]
	if b == nil {
		b = &genBound{seq: boundSeq.Add(1)}
		st.bounds[owner] = b
	}
	b.maxKeys = maxKeys
	b.refs++
	if st.applied == nil || st.applied == owner {
		st.applied = owner
		st.setMaxKeys(maxKeys)
	}
}

// releaseBound forgets one of owner's handlers. When the generation that
// serves is gone, the newest one left (the config that replaced it) sets
// the bound; a generation that never served (refused) leaves it alone.
func (st *zoneState) releaseBound(owner any) {
	st.mu.Lock()
	defer st.mu.Unlock()
	b := st.bounds[owner]
	if b == nil {
		return
	}
	if b.refs--; b.refs > 0 {
		return
	}
	delete(st.bounds, owner)
	if st.applied != owner {
		return
	}
	st.applied = nil
	var newest *genBound
	for o, nb := range st.bounds {
		if newest == nil || nb.seq > newest.seq {
			newest, st.applied = nb, o
		}
	}
	if newest != nil {
		st.setMaxKeys(newest.maxKeys)
	}
}

// setMaxKeys bounds both of the zone's tables; st.mu is held.
func (st *zoneState) setMaxKeys(n int) {
	for _, t := range []*memoryTable{st.table, st.slots} {
		if t != nil {
			t.setMaxKeys(n)
		}
	}
}

func (z *zone) release() {
	if z.state != nil {
		if z.table != nil {
			z.state.releaseBound(z.owner)
		}
		_, _ = zones.Delete(z.name)
		z.state = nil
	}
}

// memory is the zone's memory tables (nil where it has none).
func (st *zoneState) memory() (rate, slots *memoryTable) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.table, st.slots
}
