package substitute

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
)

// memo remembers, per representation, the strong ETag of a body that no
// rule matched. A later response with the same strong ETag has the same
// bytes, so scanning it cannot find anything: it is streamed without
// scanning. A body that some rule matched is not remembered (it forgets the
// representation's entry): an earlier version scanned such a body again for
// the rules that matched before only, which measured no faster than
// scanning it for every rule (1.06x with 200 rules, 7 matching;
// BenchmarkHandlerManyRules), the prefilter staying the full set's.
//
// What one caller's response teaches the memo decides how another caller's
// body is treated, so the memo remembers only what a shared cache could
// give anyone (see representation): an origin may send one strong ETag for
// variants it declares in Vary, or for bodies it builds per user, and a
// body that matched no rule for one caller must not switch scanning off
// for another.
//
// An entry costs a fixed number of bytes whatever the request: the key and
// the ETag are kept as 128-bit digests (SHA-256 under a per-memo random
// key, truncated), never as strings, which would keep a caller's whole
// request line (path and query share its memory) or an upstream's huge
// ETag alive. Two representations would share an entry only if their
// digests collided, which no caller can arrange without the key and chance
// makes negligible (2^-64 at 2^32 entries).
type memo struct {
	mu      sync.RWMutex
	max     int
	key     [32]byte
	hashes  sync.Pool           // of *memoHasher
	entries map[memoKey]memoKey // representation -> ETag of a body no rule matched
}

// memoKey is the digest of a representation, or of an ETag.
type memoKey [16]byte

type memoHasher struct {
	h   hash.Hash
	sum []byte
	buf []byte // fields go in through here, in few writes: no []byte(s) copy
}

const memoHashBuf = 512

func newMemo(max int) *memo {
	m := &memo{max: max, entries: make(map[memoKey]memoKey)}
	_, _ = rand.Read(m.key[:]) // never fails (crypto/rand panics instead)
	return m
}

// hasher starts a keyed digest.
func (m *memo) hasher() *memoHasher {
	mh, _ := m.hashes.Get().(*memoHasher)
	if mh == nil {
		mh = &memoHasher{h: sha256.New(), sum: make([]byte, 0, sha256.Size), buf: make([]byte, 0, memoHashBuf)}
	}
	mh.h.Reset()
	mh.buf = append(mh.buf[:0], m.key[:]...)
	return mh
}

// done returns the digest and gives the hasher back.
func (m *memo) done(mh *memoHasher) memoKey {
	mh.h.Write(mh.buf)
	mh.sum = mh.h.Sum(mh.sum[:0])
	var k memoKey
	copy(k[:], mh.sum)
	m.hashes.Put(mh)
	return k
}

// field adds one string, prefixed with its length plus one, so that no two
// sequences of fields and ends (a 0) give the same input.
func (mh *memoHasher) field(f string) {
	if cap(mh.buf)-len(mh.buf) < binary.MaxVarintLen64 {
		mh.h.Write(mh.buf)
		mh.buf = mh.buf[:0]
	}
	mh.buf = binary.AppendUvarint(mh.buf, uint64(len(f))+1)
	for {
		n := min(len(f), cap(mh.buf)-len(mh.buf))
		mh.buf = append(mh.buf, f[:n]...)
		if f = f[n:]; f == "" {
			return
		}
		mh.h.Write(mh.buf)
		mh.buf = mh.buf[:0]
	}
}

// end closes a list of fields.
func (mh *memoHasher) end() {
	if len(mh.buf) == cap(mh.buf) {
		mh.h.Write(mh.buf)
		mh.buf = mh.buf[:0]
	}
	mh.buf = append(mh.buf, 0)
}

// digest is the keyed digest of fields.
func (m *memo) digest(fields ...string) memoKey {
	mh := m.hasher()
	for _, f := range fields {
		mh.field(f)
	}
	return m.done(mh)
}

// representation returns the key of the representation that answers r with the
// header hdr, or false when the memo may neither use nor remember anything
// for it. The key holds everything that may select the representation:
//
//   - the status, the method, the Host with its port, the path as sent (escaped: an
//     origin may tell /a%2Fb from /a/b) and the query, as the handler
//     below sees them (handlers rewrite the request before they answer);
//   - the request's credentials (Cookie, Authorization), verbatim, when it
//     has any: a body built for them is remembered for them alone, as a
//     private cache would, whether or not the origin says Vary: Cookie;
//   - the value of each request field the response's Vary names, its list
//     elements trimmed of spaces (RFC 9111 §4.1 lets a cache normalise
//     so), so that "fr, en" and "fr,en" share an entry and "fr" and "en"
//     do not.
//
// Never remembered, as a shared cache would store none of them for anyone
// (RFC 9111 §3, §4.1): Cache-Control no-store or private, Set-Cookie (the
// response starts a session: it is built for one caller, who may have sent
// no credentials yet) and Vary: * (the origin says no request field list
// selects it).
//
// Building the key allocates nothing (BenchmarkMemoKey) unless the path
// holds escapes or Vary names, in other than canonical case, a field that
// net/textproto does not intern.
func (m *memo) representation(r *http.Request, status int, hdr http.Header) (memoKey, bool) {
	if len(hdr["Set-Cookie"]) > 0 || hasToken(hdr["Cache-Control"], "no-store") ||
		hasToken(hdr["Cache-Control"], "private") {
		return memoKey{}, false
	}
	vary := hdr["Vary"]
	if hasToken(vary, "*") {
		return memoKey{}, false
	}
	mh := m.hasher()
	// The status first, at a fixed place, as a varint (prefix-free, and no
	// string to allocate): a 404 may carry the ETag of a 200.
	mh.buf = binary.AppendUvarint(mh.buf, uint64(status))
	mh.field(r.Method)
	mh.field(r.Host)
	mh.field(r.URL.EscapedPath())
	mh.field(r.URL.RawQuery)
	for _, name := range [...]string{"Cookie", "Authorization"} {
		for _, v := range r.Header[name] {
			mh.field(v)
		}
		mh.end()
	}
	for _, v := range vary {
		for v != "" {
			var name string
			name, v, _ = strings.Cut(v, ",")
			if name = strings.TrimSpace(name); name == "" {
				continue
			}
			name = textproto.CanonicalMIMEHeaderKey(name)
			mh.field(name)
			for _, line := range r.Header[name] {
				for line != "" {
					var elem string
					elem, line, _ = strings.Cut(line, ",")
					if elem = strings.TrimSpace(elem); elem != "" {
						mh.field(elem)
					}
				}
			}
			mh.end()
		}
	}
	mh.end()
	return m.done(mh), true
}

// hasToken reports whether a comma-separated header has token (any case),
// alone or as a directive's name (max-age=60).
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for v != "" {
			var item string
			item, v, _ = strings.Cut(v, ",")
			if name, _, _ := strings.Cut(item, "="); strings.EqualFold(strings.TrimSpace(name), token) {
				return true
			}
		}
	}
	return false
}

// unmatched reports whether no rule matched the representation's body with
// this strong ETag.
func (m *memo) unmatched(res memoKey, etag string) bool {
	m.mu.RLock()
	e, ok := m.entries[res]
	m.mu.RUnlock()
	return ok && e == m.digest(etag)
}

// store remembers that no rule matched the representation's body with this
// strong ETag. When full, an arbitrary entry is forgotten: the memo only saves
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

// forget drops the representation's entry: its body now matches some rule.
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
