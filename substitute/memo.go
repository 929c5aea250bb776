package substitute

import (
	"hash/maphash"
	"sync"

	"github.com/caddy-edgekit/edgekit/substitute/engine"
)

// memo remembers, per resource (host without port, path, query), which rules
// matched the body that carried a given strong ETag. A later response with
// the same strong ETag has the same bytes, so scanning it for the other rules
// cannot find anything: it is scanned for the remembered rules only, or not
// at all when none matched. Entries are keyed by a hash but hold the full
// key, so a collision is a miss, never a wrong answer.
type memo struct {
	mu      sync.RWMutex
	max     int
	seed    maphash.Seed
	entries map[uint64]memoEntry
}

type memoEntry struct {
	host, path, query string
	etag              string
	matched           engine.Mask
}

func newMemo(max int) *memo {
	return &memo{max: max, seed: maphash.MakeSeed(), entries: make(map[uint64]memoEntry)}
}

func (m *memo) hash(host, path, query string) uint64 {
	var h maphash.Hash
	h.SetSeed(m.seed)
	h.WriteString(host)
	h.WriteByte(0)
	h.WriteString(path)
	h.WriteByte(0)
	h.WriteString(query)
	return h.Sum64()
}

// lookup returns the rules that matched the resource's body with this
// strong ETag, and whether it is known. The mask must not be modified.
func (m *memo) lookup(host, path, query, etag string) (engine.Mask, bool) {
	k := m.hash(host, path, query)
	m.mu.RLock()
	e, ok := m.entries[k]
	m.mu.RUnlock()
	if !ok || e.etag != etag || e.host != host || e.path != path || e.query != query {
		return nil, false
	}
	return e.matched, true
}

// store remembers matched (copied) for the resource. When full, an
// arbitrary entry is forgotten: the memo only saves work, so which one
// goes does not matter for correctness.
func (m *memo) store(host, path, query, etag string, matched engine.Mask) {
	k := m.hash(host, path, query)
	e := memoEntry{host: host, path: path, query: query, etag: etag, matched: matched.Clone()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entries[k]; !ok && len(m.entries) >= m.max {
		for old := range m.entries {
			delete(m.entries, old)
			break
		}
	}
	m.entries[k] = e
}

func (m *memo) len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.entries)
}
