package engine

// Mask is a set of rule numbers (0-based, in declaration order). A nil or
// zero-length Mask is empty. Use NewMask to get one sized for
// a rule set.
type Mask []uint64

// NewMask returns an empty mask able to hold rules 0..n-1.
func NewMask(n int) Mask { return make(Mask, (n+63)/64) }

// Has reports whether rule i is in the set.
func (m Mask) Has(i int) bool {
	w := i >> 6
	return w < len(m) && m[w]&(1<<(uint(i)&63)) != 0
}

// Add puts rule i in the set; the mask must be large enough.
func (m Mask) Add(i int) { m[i>>6] |= 1 << (uint(i) & 63) }

// Remove takes rule i out of the set.
func (m Mask) Remove(i int) {
	if w := i >> 6; w < len(m) {
		m[w] &^= 1 << (uint(i) & 63)
	}
}

// Empty reports whether no rule is in the set.
func (m Mask) Empty() bool {
	for _, w := range m {
		if w != 0 {
			return false
		}
	}
	return true
}

// Equal reports whether m and o hold the same rules.
func (m Mask) Equal(o Mask) bool {
	n := max(len(m), len(o))
	for i := range n {
		var a, b uint64
		if i < len(m) {
			a = m[i]
		}
		if i < len(o) {
			b = o[i]
		}
		if a != b {
			return false
		}
	}
	return true
}
