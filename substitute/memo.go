package substitute

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"sync"

	"github.com/caddy-edgekit/edgekit/substitute/internal/engine"
)

// memo remembers, per resource (method, host without port, path, query),
// which rules matched the body that carried a given strong ETag. A later
// response with the same strong ETag has the same bytes, so scanning it for
// the other rules cannot find anything: it is scanned for the remembered
// rules only, or not at all when none matched.
//
// An entry costs a fixed number of bytes whatever the request: the
// resource and the ETag are kept as 128-bit digests (SHA-256 under a
// per-memo random key, truncated), never as strings, which would keep a
// caller's whole request line (path and query share its memory) or an
// upstream's huge ETag alive. Two resources would share an entry only if
// their digests collided, which no caller can arrange without the key and
// chance makes negligible (2^-64 at 2^32 entries).
type memo struct {
	mu      sync.RWMutex
	max     int
	key     [32]byte
	hashes  sync.Pool // of *memoHasher
	entries map[memoKey]memoEntry
}

// memoKey is the digest of a resource, or of an ETag.
type memoKey [16]byte

type memoEntry struct {
	etag    memoKey
	matched engine.Mask
}

type memoHasher struct {
	h       hash.Hash
	sum     []byte
	scratch [256]byte // strings go in through here: no []byte(s) copy
}

func newMemo(max int) *memo {
	m := &memo{max: max, entries: make(map[memoKey]memoEntry)}
	_, _ = rand.Read(m.key[:]) // never fails (crypto/rand panics instead)
	return m
}

// digest is the keyed digest of fields, each length-prefixed so that no two
// lists of fields give the same input.
func (m *memo) digest(fields ...string) memoKey {
	mh, _ := m.hashes.Get().(*memoHasher)
	if mh == nil {
		mh = &memoHasher{h: sha256.New(), sum: make([]byte, 0, sha256.Size)}
	}
	mh.h.Reset()
	mh.h.Write(m.key[:])
	for _, f := range fields {
		mh.h.Write(binary.AppendUvarint(mh.scratch[:0], uint64(len(f))))
		for len(f) > 0 {
			n := copy(mh.scratch[:], f)
			mh.h.Write(mh.scratch[:n])
			f = f[n:]
		}
	}
	mh.sum = mh.h.Sum(mh.sum[:0])
	var k memoKey
	copy(k[:], mh.sum)
	m.hashes.Put(mh)
	return k
}

// resource is the key of a request's resource.
func (m *memo) resource(method, host, path, query string) memoKey {
	return m.digest(method, host, path, query)
}

// lookup returns the rules that matched the resource's body with this
// strong ETag, and whether it is known. The mask must not be modified.
func (m *memo) lookup(res memoKey, etag string) (engine.Mask, bool) {
	m.mu.RLock()
	e, ok := m.entries[res]
	m.mu.RUnlock()
	if !ok || e.etag != m.digest(etag) {
		return nil, false
	}
	return e.matched, true
}

// store remembers matched (copied) for the resource. When full, an
// arbitrary entry is forgotten: the memo only saves work, so which one
// goes does not matter for correctness.
func (m *memo) store(res memoKey, etag string, matched engine.Mask) {
	e := memoEntry{etag: m.digest(etag), matched: matched.Clone()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entries[res]; !ok && len(m.entries) >= m.max {
		for old := range m.entries {
			delete(m.entries, old)
			break
		}
	}
	m.entries[res] = e
}

func (m *memo) len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.entries)
}
