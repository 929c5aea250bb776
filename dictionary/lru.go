package dictionary

import (
	"container/list"
	"sync"
)

// lru is a map bounded in bytes: adding past the bound evicts the least
// recently used entries until the sum of the sizes fits again. Every cache
// of the module (the dictionary store, the delta cache) is one, so none
// can grow with the traffic. It is safe for concurrent use.
type lru[K comparable, V any] struct {
	mu      sync.Mutex
	max     int64
	size    int64
	order   list.List // of *lruEntry[K, V], most recently used first
	items   map[K]*list.Element
	onEvict func(K, V) // called with mu held; must not call back into the lru
}

type lruEntry[K comparable, V any] struct {
	key  K
	val  V
	size int64
}

func newLRU[K comparable, V any](maxBytes int64, onEvict func(K, V)) *lru[K, V] {
	return &lru[K, V]{max: maxBytes, items: make(map[K]*list.Element), onEvict: onEvict}
}

// get returns the value under k and marks it most recently used.
func (c *lru[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry[K, V]).val, true
}

// add stores v under k, counting size bytes, replacing what k held. A
// value larger than the whole bound is not stored (add reports false).
func (c *lru[K, V]) add(k K, v V, size int64) bool {
	if size < 0 || size > c.max {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.removeElement(e)
	}
	c.items[k] = c.order.PushFront(&lruEntry[K, V]{key: k, val: v, size: size})
	c.size += size
	for c.size > c.max {
		c.removeElement(c.order.Back())
	}
	return true
}

// remove drops k, if present.
func (c *lru[K, V]) remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.removeElement(e)
	}
}

func (c *lru[K, V]) removeElement(e *list.Element) {
	ent := c.order.Remove(e).(*lruEntry[K, V])
	delete(c.items, ent.key)
	c.size -= ent.size
	if c.onEvict != nil {
		c.onEvict(ent.key, ent.val)
	}
}

// stats returns the number of entries and the bytes they count.
func (c *lru[K, V]) stats() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.size
}
