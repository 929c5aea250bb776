package substitute

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"sync"
)

// memo remembers, per resource (method, host without port, path, query),
// the strong ETag of a body that no rule matched. A later response with the
// same strong ETag has the same bytes, so scanning it cannot find anything:
// it is streamed without scanning. A body that some rule matched is not
// remembered (it forgets the resource's entry): an earlier version scanned
// such a body again for the rules that matched before only, which measured
// no faster than scanning it for every rule (1.06x with 200 rules, 7
// matching; BenchmarkHandlerManyRules), the prefilter staying the full
// set's.
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
	hashes  sync.Pool           // of *memoHasher
	entries map[memoKey]memoKey // resource -> ETag of a body no rule matched
}

// memoKey is the digest of a resource, or of an ETag.
type memoKey [16]byte

type memoHasher struct {
	h       hash.Hash
	sum     []byte
	scratch [256]byte // strings go in through here: no []byte(s) copy
}

func newMemo(max int) *memo {
	m := &memo{max: max, entries: make(map[memoKey]memoKey)}
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

// unmatched reports whether no rule matched the resource's body with this
// strong ETag.
func (m *memo) unmatched(res memoKey, etag string) bool {
	m.mu.RLock()
	e, ok := m.entries[res]
	m.mu.RUnlock()
	return ok && e == m.digest(etag)
}

// store remembers that no rule matched the resource's body with this strong
// ETag. When full, an arbitrary entry is forgotten: the memo only saves
// work, so which one goes does not matter for correctness.
func (m *memo) store(res memoKey, etag string) {
	e := m.digest(etag)
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

// forget drops the resource's entry: its body now matches some rule.
func (m *memo) forget(res memoKey) {
	m.mu.RLock()
	_, ok := m.entries[res]
	m.mu.RUnlock()
	if !ok {
		return // the common case for a matching body: no write lock
	}
	m.mu.Lock()
	delete(m.entries, res)
	m.mu.Unlock()
}

func (m *memo) len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.entries)
}
