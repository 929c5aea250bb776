package earlyhints

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func testStore(maxPaths int, maxBytes int64, maxAge time.Duration) (*store, *clock) {
	c := &clock{t: time.Unix(1e9, 0)}
	s := newStore(maxPaths, maxBytes, maxAge)
	s.now = c.now
	return s, c
}

// TestStoreLRU: past max_paths the least recently used path goes; a get
// makes a path recent.
func TestStoreLRU(t *testing.T) {
	s, _ := testStore(2, 1<<20, time.Hour)
	s.put("a", []string{"</a>; rel=preload"})
	s.put("b", []string{"</b>; rel=preload"})
	s.getString("a")
	s.put("c", []string{"</c>; rel=preload"})
	if s.getString("b") != nil || s.getString("a") == nil || s.getString("c") == nil || s.len() != 2 {
		t.Fatalf("after a, b, get a, c: b %v a %v c %v len %d; want b evicted", s.getString("b"), s.getString("a"), s.getString("c"), s.len())
	}
}

// TestStoreRelearnAndForget: the latest put wins, an empty one forgets.
func TestStoreRelearnAndForget(t *testing.T) {
	s, _ := testStore(10, 1<<20, time.Hour)
	if !s.put("p", []string{"</v1.js>; rel=preload"}) {
		t.Fatal("first put reported no change")
	}
	if s.put("p", []string{"</v1.js>; rel=preload"}) {
		t.Fatal("same links reported as changed")
	}
	s.put("p", []string{"</v2.js>; rel=preload"})
	if got := s.getString("p"); !slices.Equal(got, []string{"</v2.js>; rel=preload"}) {
		t.Fatalf("after relearning: %q", got)
	}
	s.put("p", nil)
	if s.getString("p") != nil || s.len() != 0 || s.size() != 0 {
		t.Fatalf("an empty put left %v (len %d, %d bytes)", s.getString("p"), s.len(), s.size())
	}
}

// TestStoreExpiry: an entry older than max_age is a miss and is dropped;
// seeing the same links again renews it.
func TestStoreExpiry(t *testing.T) {
	s, c := testStore(10, 1<<20, time.Hour)
	s.put("p", []string{"</a>; rel=preload"})
	c.t = c.t.Add(59 * time.Minute)
	s.put("p", []string{"</a>; rel=preload"}) // seen again: renewed
	c.t = c.t.Add(59 * time.Minute)
	if s.getString("p") == nil {
		t.Fatal("renewed entry expired")
	}
	c.t = c.t.Add(61 * time.Minute)
	if s.getString("p") != nil || s.len() != 0 {
		t.Fatal("entry older than max_age still hinted")
	}
}

// TestStoreByteBound: max_bytes bounds the store whatever the entry count.
func TestStoreByteBound(t *testing.T) {
	s, _ := testStore(1000, 4096, time.Hour)
	for i := range 1000 {
		s.put(strconv.Itoa(i), []string{"</" + repeat("x", 500) + ">; rel=preload"})
		if s.size() > 4096 {
			t.Fatalf("store at %d bytes after %d puts, bound 4096", s.size(), i+1)
		}
	}
	if s.len() == 0 || s.len() > 7 {
		t.Fatalf("%d entries of ~700 bytes in 4096", s.len())
	}
}

// TestStoreFloodOfDistinctPaths: 1M distinct paths (the most a flood can
// make the store learn, each with the most links a path may hold) keep
// the store at max_paths and max_bytes, and the heap within a bound
// derived from them.
func TestStoreFloodOfDistinctPaths(t *testing.T) {
	if testing.Short() {
		t.Skip("1M puts")
	}
	const maxPaths, maxBytes = 10000, 4 << 20
	s, _ := testStore(maxPaths, maxBytes, time.Hour)
	links := make([]string, maxPathLinks)
	for i := range links {
		links[i] = fmt.Sprintf("</static/asset-%02d.js>; rel=preload; as=script", i)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < 1_000_000; i += 4 {
				s.put("example.com /flood/"+strconv.Itoa(i), links)
			}
		})
	}
	wg.Wait()
	if n := s.len(); n > maxPaths {
		t.Fatalf("%d paths, bound %d", n, maxPaths)
	}
	if b := s.size(); b > maxBytes {
		t.Fatalf("%d bytes, bound %d", b, maxBytes)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// The links slice is shared; each entry holds its key, list element,
	// map slot: well under 1 KiB. 16 MiB is the budget for 10000 entries
	// plus the map's buckets (which never shrink from a peak of 10001).
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 16<<20 {
		t.Fatalf("heap grew %d bytes for a store bounded at %d paths", grown, maxPaths)
	}
	runtime.KeepAlive(s)
}

// TestStoreCloseDropsEverything: a closed store (its config unloaded)
// holds nothing and learns nothing more, so a replaced handler that still
// serves an old connection keeps no store alive.
func TestStoreCloseDropsEverything(t *testing.T) {
	s := newStore(100, 1<<20, time.Hour)
	for i := range 50 {
		s.put("a.test/"+strconv.Itoa(i), []string{"</a.js>; rel=preload; as=script"})
	}
	if s.len() != 50 {
		t.Fatalf("store holds %d, want 50", s.len())
	}
	s.close()
	if s.len() != 0 || s.size() != 0 || s.getString("a.test/1") != nil {
		t.Fatalf("closed store holds %d paths, %d bytes", s.len(), s.size())
	}
	if s.put("a.test/x", []string{"</b.js>; rel=preload; as=script"}) || s.len() != 0 {
		t.Fatal("a closed store learned")
	}
}

// TestCleanupClosesTheStore: Caddy calls Cleanup when it unloads the
// handler's config.
func TestCleanupClosesTheStore(t *testing.T) {
	h := &Handler{}
	h.store = newStore(10, 1<<20, time.Hour)
	h.store.put("a.test/", []string{"</a.js>; rel=preload; as=script"})
	if err := h.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if h.store.len() != 0 {
		t.Fatal("Cleanup left the store full")
	}
}

// getString is get with a string key.
func (s *store) getString(key string) []string { return s.get([]byte(key)) }
