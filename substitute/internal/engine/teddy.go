package engine

import "math/bits"

// Teddy is a vector prefilter (from Hyperscan, by way of Rust's
// aho-corasick): the byte triples that can begin a match are put in at
// most eight buckets, and each bucket is described, for each of the three
// bytes, by the set of its low nibbles and the set of its high nibbles. A
// position may start a match if some bucket holds all six nibbles of the
// triple there; with the tables below that is six table lookups and five
// ANDs, which a vector byte shuffle does for 32 positions at once
// (teddy_amd64.s). The buckets only widen the set of triples, so every
// position the scalar scan would pass, Teddy passes too; what it passes
// is confirmed by the pair and triple tables before the DFA runs.
//
// It is used where the vector instructions exist (AVX2 on amd64; the
// purego build tag turns it off) and where the triples are few enough
// that the buckets stay narrow (teddyMaxPass); elsewhere the scalar scan
// of prefilter.next runs.

// teddyMasks holds, for byte o of a triple, the buckets by low nibble
// (row 2o) and by high nibble (row 2o+1): bit b of an entry is bucket b.
// Each 16-byte table is repeated for the two 128-bit lanes of a vector.
type teddyMasks [6][32]byte

// teddyBucket is a set of triples: byte o is in it if its low nibble is in
// lo[o] and its high nibble in hi[o].
type teddyBucket struct{ lo, hi [3]uint16 }

func (b teddyBucket) union(c teddyBucket) teddyBucket {
	for o := range 3 {
		b.lo[o] |= c.lo[o]
		b.hi[o] |= c.hi[o]
	}
	return b
}

// pass estimates the share of positions of a typical text body whose
// triple falls in b (textWeight gives each byte's share).
func (b teddyBucket) pass() float64 {
	p := 1.0
	for o := range 3 {
		w := 0.0
		for hi := uint32(b.hi[o]); hi != 0; hi &= hi - 1 {
			h := bits.TrailingZeros32(hi)
			for lo := uint32(b.lo[o]); lo != 0; lo &= lo - 1 {
				w += textWeight[h<<4|bits.TrailingZeros32(lo)]
			}
		}
		p *= w
	}
	return p
}

// teddyMaxPass is the share of positions above which the buckets are too
// wide for Teddy to beat the scalar scan (each passed position costs a
// table test and, often, a branch miss).
const teddyMaxPass = 0.01

// teddyMaxGroups bounds the triple groups merged into buckets (the merge
// is quadratic in them); larger rule sets keep the scalar scan.
const teddyMaxGroups = 64

// teddyBlock is how many positions a Teddy step tests; a block is scanned
// only if the buffer holds teddyNeed bytes from its start, so that every
// position it passes has the six bytes after it that prefilter.next reads
// (the asm has the same figures).
const (
	teddyBlock = 32
	teddyNeed  = teddyBlock + 5
)

// newTeddy merges the groups of triples that can begin a match (from
// addTriples) into eight buckets, cheapest merge first, and returns their
// masks if there were at most teddyMaxGroups groups and the buckets pass
// few enough positions; else nil.
func newTeddy(groups []teddyBucket) *teddyMasks {
	if len(groups) == 0 || len(groups) > teddyMaxGroups {
		return nil
	}
	for len(groups) > 8 {
		// Merge the two groups whose union adds the least.
		bi, bj, best := 0, 1, 2.0
		for i := range groups {
			for j := i + 1; j < len(groups); j++ {
				u := groups[i].union(groups[j])
				if cost := u.pass() - groups[i].pass() - groups[j].pass(); cost < best {
					bi, bj, best = i, j, cost
				}
			}
		}
		groups[bi] = groups[bi].union(groups[bj])
		groups = append(groups[:bj], groups[bj+1:]...)
	}
	total := 0.0
	for _, g := range groups {
		total += g.pass()
	}
	if total > teddyMaxPass {
		return nil
	}
	m := new(teddyMasks)
	for b, g := range groups {
		for o := range 3 {
			for n := range 16 {
				for lane := 0; lane < 32; lane += 16 {
					if g.lo[o]&(1<<n) != 0 {
						m[2*o][lane+n] |= 1 << b
					}
					if g.hi[o]&(1<<n) != 0 {
						m[2*o+1][lane+n] |= 1 << b
					}
				}
			}
		}
	}
	return m
}

// add puts the bytes bs in b as byte o of its triples.
func (b *teddyBucket) add(o int, bs []byte) {
	for _, c := range bs {
		b.lo[o] |= 1 << (c & 15)
		b.hi[o] |= 1 << (c >> 4)
	}
}

// buckets returns the buckets whose triple holds b0 b1 b2 (the reference
// for the vector code).
func (m *teddyMasks) buckets(b0, b1, b2 byte) byte {
	return m[0][b0&15] & m[1][b0>>4] & m[2][b1&15] & m[3][b1>>4] & m[4][b2&15] & m[5][b2>>4]
}

// teddyScanGo is teddyScan in Go: the first 32-position block, from
// buf[0], whose positions hold a bucket's triple, and the positions (bit
// p for buf[i+p]); or where it stopped, and 0. A block is scanned only if
// buf holds teddyNeed bytes from its start.
func teddyScanGo(m *teddyMasks, buf []byte) (i int, mask uint32) {
	for ; i+teddyNeed <= len(buf); i += teddyBlock {
		for p := range teddyBlock {
			if m.buckets(buf[i+p], buf[i+p+1], buf[i+p+2]) != 0 {
				mask |= 1 << p
			}
		}
		if mask != 0 {
			return i, mask
		}
	}
	return i, 0
}

// textWeight is each byte's share of typical text, HTML and JavaScript
// (roughly: lower-case letters and space most, then other printable ASCII,
// the rest rare); only its orders of magnitude matter.
var textWeight = func() (w [256]float64) {
	total := 0.0
	for b := range 256 {
		switch {
		case b == ' ':
			w[b] = 15
		case b >= 'a' && b <= 'z':
			w[b] = 3
		case b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '\n', b == '\t':
			w[b] = 0.8
		case b > ' ' && b < 0x7F:
			w[b] = 0.6
		default:
			w[b] = 0.01
		}
		total += w[b]
	}
	for b := range w {
		w[b] /= total
	}
	return w
}()
