package dictionary

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"
)

// dictKey names a stored dictionary: the origin (scheme://host[:port]) of
// the response it came from, and its SHA-256. A client's Available-Dictionary
// is looked up under the origin of its own request only, so a dictionary
// is never used for another site, even one with the same bytes.
type dictKey struct {
	origin string
	hash   [hashSize]byte
}

// resourceKey names a marked response by its strong ETag, so that the same
// bytes are not captured and hashed again on every request.
type resourceKey struct {
	origin, path, etag string
}

// entryOverhead is what the store counts per dictionary beyond its bytes:
// the entry, its keys and maps, rounded up.
const entryOverhead = 512

// minDictSize is the smallest body kept as a dictionary.
const minDictSize = 64

// dict is one stored dictionary: the bytes of a marked response, and the
// encoders prepared for it. It never changes once stored (the encoders
// are pooled inside), so requests share it without locks.
type dict struct {
	key  dictKey
	data []byte
	// match and dests are those the response was marked with: a request
	// is compressed against the dictionary only if they select it, as they
	// do in the browser.
	match pattern
	dests []string
	res   resourceKey // the response it came from, if it had a strong ETag

	encoders encoderPools
}

// store holds dictionaries, bounded in bytes (LRU).
type store struct {
	dicts *lru[dictKey, *dict]
	// byResource remembers which dictionary a response with a strong ETag
	// gave; bounded too, since many paths may give the same bytes.
	byResource *lru[resourceKey, dictKey]

	// captureBudget is how many bytes in-flight responses may still
	// buffer to become dictionaries (shared by every request, so a burst
	// of concurrent candidates cannot hold more than the store's size).
	captureBudget atomic.Int64

	// gaugeMu guards what this store last added to the store gauges, which
	// sum every handler's store.
	gaugeMu               sync.Mutex
	gaugeDicts, gaugeSize int64
	closed                bool
}

func newStore(maxBytes int64) *store {
	s := &store{byResource: newLRU[resourceKey, dictKey](max(maxBytes/64, 64<<10), nil)}
	s.captureBudget.Store(maxBytes)
	s.dicts = newLRU(maxBytes, func(dictKey, *dict) { metrics.evictions.Inc() })
	return s
}

// lookup returns the dictionary of origin with the given hash.
func (s *store) lookup(origin string, hash [hashSize]byte) (*dict, bool) {
	return s.dicts.get(dictKey{origin, hash})
}

// known reports whether the response res (with a strong ETag) is stored.
func (s *store) known(res resourceKey) bool {
	k, ok := s.byResource.get(res)
	if !ok {
		return false
	}
	_, ok = s.dicts.get(k)
	return ok
}

// add stores data, the complete body of a response marked with match and
// dests, and reports whether it fits.
func (s *store) add(origin string, data []byte, match pattern, dests []string, res resourceKey, cfg encoderConfig) bool {
	if len(data) < minDictSize {
		return false // nothing to gain, and the encoders want some history
	}
	k := dictKey{origin, sha256.Sum256(data)}
	if _, ok := s.dicts.get(k); ok {
		s.noteResource(res, k)
		return true // the same bytes again (another path, or no ETag)
	}
	d := &dict{key: k, data: data, match: match, dests: dests, res: res}
	d.encoders.init(d.data, k.hash, cfg)
	if !s.dicts.add(k, d, dictCost(len(data), cfg.dcb)+int64(len(origin))) {
		return false
	}
	s.noteResource(res, k)
	s.updateGauges()
	metrics.stored.Inc()
	return true
}

// updateGauges brings this store's share of the store gauges up to date.
func (s *store) updateGauges() {
	n, size := s.stats()
	s.gaugeMu.Lock()
	defer s.gaugeMu.Unlock()
	if s.closed {
		return
	}
	metrics.storeDicts.Add(float64(int64(n) - s.gaugeDicts))
	metrics.storeBytes.Add(float64(size - s.gaugeSize))
	s.gaugeDicts, s.gaugeSize = int64(n), size
}

// Destruct is called when no loaded config uses the store any more.
func (s *store) Destruct() error {
	s.close()
	return nil
}

// close takes the store out of the gauges.
func (s *store) close() {
	s.gaugeMu.Lock()
	defer s.gaugeMu.Unlock()
	metrics.storeDicts.Sub(float64(s.gaugeDicts))
	metrics.storeBytes.Sub(float64(s.gaugeSize))
	s.gaugeDicts, s.gaugeSize, s.closed = 0, 0, true
}

func (s *store) noteResource(res resourceKey, k dictKey) {
	if res.etag == "" {
		return
	}
	s.byResource.add(res, k, resourceSize(res))
}

// dictCost is what the store counts for a dictionary of n bytes: its
// bytes, the entry, and when dcb is offered the Brotli dictionary go-brrr
// prepares for it (built on the first dcb request, counted from the
// start). That one is an upper bound fitted on go-brrr v1.3.1, measured by
// TestPreparedBrotliDictionaryCost: about 300 KiB of fixed tables plus 1.6
// to 3 bytes per dictionary byte.
func dictCost(n int, dcb bool) int64 {
	cost := int64(n) + entryOverhead
	if dcb {
		cost += preparedBrotliFixed + preparedBrotliPerByte*int64(n)/10
	}
	return cost
}

const (
	preparedBrotliFixed   = 320 << 10
	preparedBrotliPerByte = 32 // tenths of a byte
)

// resourceSize is what byResource counts for res.
func resourceSize(res resourceKey) int64 {
	return int64(len(res.origin)+len(res.path)+len(res.etag)) + 128
}

// reserve takes n bytes of the capture budget, or reports false.
func (s *store) reserve(n int64) bool {
	for {
		left := s.captureBudget.Load()
		if left < n {
			return false
		}
		if s.captureBudget.CompareAndSwap(left, left-n) {
			return true
		}
	}
}

// release gives n reserved bytes back.
func (s *store) release(n int64) { s.captureBudget.Add(n) }

// stats returns the number of dictionaries and the bytes the store counts.
func (s *store) stats() (int, int64) { return s.dicts.stats() }
