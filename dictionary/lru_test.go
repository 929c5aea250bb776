package dictionary

import "testing"

func TestLRUBoundAndOrder(t *testing.T) {
	var evicted []int
	c := newLRU(100, func(k int, _ string) { evicted = append(evicted, k) })
	for k := range 5 {
		if !c.add(k, "v", 30) {
			t.Fatalf("add %d refused", k)
		}
		if _, size := c.stats(); size > 100 {
			t.Fatalf("size %d over the bound", size)
		}
	}
	// 0 and 1 went first; touching 2 keeps it over 3.
	if _, ok := c.get(2); !ok {
		t.Fatal("2 evicted too early")
	}
	c.add(5, "v", 30)
	if _, ok := c.get(3); ok {
		t.Fatal("3 (least recently used) kept")
	}
	if _, ok := c.get(2); !ok {
		t.Fatal("2 (recently used) evicted")
	}
	if got := []int{0, 1, 3}; len(evicted) != 3 || evicted[0] != got[0] || evicted[1] != got[1] || evicted[2] != got[2] {
		t.Fatalf("evicted %v, want %v", evicted, got)
	}
	if c.add(9, "big", 101) {
		t.Fatal("a value over the whole bound was stored")
	}
	c.add(2, "again", 10) // replace: counted once
	if n, size := c.stats(); n != 3 || size != 70 {
		t.Fatalf("%d entries, %d bytes; want 3, 70", n, size)
	}
}
