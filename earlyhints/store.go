package earlyhints

import (
	"container/list"
	"sync"
	"time"
)

// entrySize is what an entry costs beyond its key and values (list
// element, map slot, slice headers), counted against max_bytes so that a
// flood of tiny entries is bounded too.
const entrySize = 160

// linkOverhead is what each link costs beyond its bytes (its string
// header in the entry's slice).
const linkOverhead = 16

// store holds the links learned per site and path: an LRU bounded in
// entries (max_paths) and in bytes (max_bytes); an entry older than maxAge
// is a miss and is dropped when looked up. It is safe for concurrent use.
type store struct {
	mu       sync.Mutex
	maxPaths int
	maxBytes int64
	maxAge   time.Duration
	now      func() time.Time // injected by tests

	bytes  int64
	order  list.List // of *entry, most recently used first
	items  map[string]*list.Element
	closed bool // after close: holds nothing, learns nothing
}

type entry struct {
	key     string
	links   []string // serialised field values
	learned time.Time
	size    int64
}

func newStore(maxPaths int, maxBytes int64, maxAge time.Duration) *store {
	return &store{maxPaths: maxPaths, maxBytes: maxBytes, maxAge: maxAge, now: time.Now, items: map[string]*list.Element{}}
}

// get returns the links learned under key (shared: callers must not
// modify them), marking it recently used. The key is bytes so that a
// lookup from a stack buffer does not allocate.
func (s *store) get(key []byte) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.items[string(key)]
	if !ok {
		return nil
	}
	ent := e.Value.(*entry)
	if s.now().Sub(ent.learned) > s.maxAge {
		s.remove(e)
		metrics.expired.Inc()
		return nil
	}
	s.order.MoveToFront(e)
	return ent.links
}

// put stores links under key, replacing what it held: the latest
// learnable response wins, and one with no links forgets the path. It
// reports whether the entry changed.
func (s *store) put(key string, links []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.items[key]; ok {
		ent := e.Value.(*entry)
		if equal(ent.links, links) {
			ent.learned = s.now()
			s.order.MoveToFront(e)
			return false
		}
		s.remove(e)
	}
	if len(links) == 0 || s.closed {
		return false
	}
	size := int64(entrySize + len(key))
	for _, l := range links {
		size += int64(len(l)) + linkOverhead
	}
	if size > s.maxBytes {
		return false
	}
	s.items[key] = s.order.PushFront(&entry{key: key, links: links, learned: s.now(), size: size})
	s.bytes += size
	for len(s.items) > s.maxPaths || s.bytes > s.maxBytes {
		s.remove(s.order.Back())
		metrics.evicted.Inc()
	}
	return true
}

func (s *store) remove(e *list.Element) {
	ent := s.order.Remove(e).(*entry)
	delete(s.items, ent.key)
	s.bytes -= ent.size
}

// close empties the store for good: the handler's config was unloaded.
// Caddy lets a replaced server finish the requests of the connections it
// still has (without a grace_period, for as long as a client keeps one
// busy), so an unloaded handler can live on for a while; its store must
// not, or every reload under steady keep-alive traffic would keep one
// full store more.
func (s *store) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.items = map[string]*list.Element{}
	s.order.Init()
	s.bytes = 0
}

// len and size report the store's occupation, for tests.
func (s *store) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}

func (s *store) size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
