package engine

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// The prefilter finds the positions where a match may start, so that the
// DFA runs only there. Its tables are built from the DFA at compile time:
//
//   - pair: the byte pairs that can begin a match (b1 leaves a start state
//     alive, and b2 keeps it alive or completes a one-byte match), tested
//     seven pairs per 8-byte load against pair7, a copy folded on the low 7
//     bits of each byte (32 KiB, so it stays in L1); hits are confirmed by
//   - triple: the byte triples that can begin a match, hashed (the table may
//     let through triples that cannot match, never the reverse);
//   - anchors: when every match holds at least stride+2 bytes (stride 2 or
//     3, from the shortest rule's syntax), every match holds, at some
//     offset below the stride, a triple that the DFA allows there. Testing
//     one position in stride against the hashed table of those triples
//     finds every match; the table keeps per triple the offsets it occurs
//     at (bit stride-1-o for offset o), so a hit at position a sends only
//     the starts a-o on to the pair and triple tests (about 17,000 per MB
//     of the HTML sample instead of 37,000). Wide classes ([^"]) allow so
//     many triples that the stage is left off (stride 1);
//   - teddy: where the CPU has AVX2 and the triples fit eight narrow
//     buckets, a vector scan of 32 positions at a time (teddy.go) in place
//     of the two scalar stages; what it passes is confirmed by the pair and
//     triple tables and, with a stride above 1, the anchors at offset
//     stride-1;
//   - litOwner: per hashed first triple, a literal rule that alone can
//     match where that triple starts, so that the stream compares the
//     literal instead of running the DFA (Stream.literal).
//
// The invariant, tested on its own by TestPrefilterNeverSkipsAStart: next
// never skips a position from which the DFA, started there with every
// rule, would match or would still be alive where the input ends.
type prefilter struct {
	first  [256]bool    // bytes that leave a start state alive
	pair   [65536]uint8 // indexed by b[i] | b[i+1]<<8
	pair7  [32768]uint8 // pair folded on the low 7 bits of each byte
	triple [65536]uint8 // indexed by tripleHash(b[i], b[i+1], b[i+2])

	stride  int // 1: no anchor stage
	anchors [anchorSize]uint8

	litOwner [litSlots]int32 // by litSlot of a first triple; -1: none
	teddy    *teddyMasks     // nil: the scalar stages
}

const (
	// tripleBudget bounds the table writes of the triple table's
	// construction: past it the rules' classes are so wide (. or \pL) that
	// the table would pass nearly every triple, and it is filled instead.
	tripleBudget = 1 << 18
	// anchorBudget bounds the anchor table's construction likewise; a
	// filled anchor table would pass every position and only slow the scan.
	anchorBudget = 1 << 16
	// maxStride is the largest anchor stride: the anchors of two to four
	// positions then fit one eight-byte load.
	maxStride = 3
	// anchorBits is the size of the anchor table's hash (one byte per
	// entry, 32 KiB: it stays in the L1 cache).
	anchorBits = 15
	anchorSize = 1 << anchorBits
	anchorMask = anchorSize - 1
	// litSlots is the size of the literal-owner table (a power of two).
	litSlots = 1024
)

// newPrefilter builds the prefilter of s, whose DFA and start states are
// ready; minLen is a lower bound of the length of every match.
func newPrefilter(s *Set, minLen int) *prefilter {
	p := new(prefilter)
	members := s.classMembers()
	if groups := p.buildPairsAndTriples(s, members); groups != nil {
		p.teddy = newTeddy(groups)
	}
	p.buildAnchors(s, members, minLen)
	p.buildLiteralOwners(s)
	return p
}

// buildPairsAndTriples fills first, pair, pair7 and triple. It returns the
// triples that can begin a match in groups for Teddy (see addTriples), or
// nil if the triple table was filled and passes every triple.
func (p *prefilter) buildPairsAndTriples(s *Set, members [][]byte) []teddyBucket {
	d := s.dfa
	nc := len(d.classRep)
	rows := map[*state]*[256]bool{} // classes allowed after t1
	budget := tripleBudget
	if s.maxMatch < 2 {
		// An attempt is dropped when it is alive after MaxMatch+1 bytes: a
		// prefilter must not reject it for its third byte, or whether it
		// counts as dropped would depend on where the writes end.
		budget = -1
	}
	var groups []teddyBucket
	for _, st := range s.full {
		for c1 := range nc {
			t1 := d.next(st, c1)
			if len(t1.pcs) == 0 {
				continue
			}
			for _, b := range members[c1] {
				p.first[b] = true
			}
			row := rows[t1]
			if row == nil {
				row = new([256]bool)
				rows[t1] = row
				for c2 := range nc {
					row[c2] = d.next(t1, c2).alive()
				}
			}
			p.addTriples(s, t1, members[c1], members, &budget, &groups)
			for _, b1 := range members[c1] {
				for b2 := range 256 {
					if row[s.classes[b2]] {
						p.pair[uint16(b1)|uint16(b2)<<8] = 1
					}
				}
			}
		}
	}
	for x, v := range p.pair {
		p.pair7[x&0x7F7F] |= v
	}
	if budget < 0 {
		for i := range p.triple {
			p.triple[i] = 1
		}
		return nil
	}
	return groups
}

// addTriples marks the triples b1 b2 b3 (b1 in first, which leads to t1)
// that can begin a match, and adds them to groups as a Teddy bucket per
// class of b2 (up to teddyMaxGroups+1 distinct groups; Teddy is not used
// past teddyMaxGroups). It charges its table writes to budget, and stops
// once the budget is spent (the caller then fills the table).
func (p *prefilter) addTriples(s *Set, t1 *state, first []byte, members [][]byte, budget *int, groups *[]teddyBucket) {
	if *budget < 0 {
		return
	}
	d := s.dfa
	nc := len(d.classRep)
	for c2 := range nc {
		t2 := d.next(t1, c2)
		if !t2.alive() {
			continue
		}
		var ok [256]bool
		for c3 := range nc {
			// After a one-byte match, any third byte.
			ok[c3] = t2.match >= 0 || d.next(t2, c3).alive()
		}
		if *budget -= len(first) * len(members[c2]) * 256; *budget < 0 {
			return
		}
		for _, b1 := range first {
			for _, b2 := range members[c2] {
				for b3 := range 256 {
					if ok[s.classes[b3]] {
						p.triple[tripleHash(uint32(b1)|uint32(b2)<<8|uint32(b3)<<16)] = 1
					}
				}
			}
		}
		if len(*groups) <= teddyMaxGroups {
			var g teddyBucket
			g.add(0, first)
			g.add(1, members[c2])
			for c3 := range nc {
				if ok[c3] {
					g.add(2, members[c3])
				}
			}
			if !slices.Contains(*groups, g) {
				*groups = append(*groups, g)
			}
		}
	}
}

// buildAnchors chooses the stride k (2 or 3; 1 turns anchors off) so that
// every match holds k+2 bytes, and marks in anchors the byte triples that a
// match can hold at offsets 0..k-1 (bit k-1-o for offset o), walking the
// DFA from the start states one level per offset. If the levels or the
// triples grow too many it leaves the stride at 1.
func (p *prefilter) buildAnchors(s *Set, members [][]byte, minLen int) {
	p.stride = 1
	k := min(minLen-2, maxStride)
	if k < 2 {
		return
	}
	d := s.dfa
	nc := len(d.classRep)
	anchors := new([anchorSize]uint8)
	var level []*state
	seen := map[*state]bool{}
	for _, t := range s.full {
		if !seen[t] {
			seen[t] = true
			level = append(level, t)
		}
	}
	budget := anchorBudget
	for o := range k {
		var next []*state
		seen := map[*state]bool{}
		for _, t := range level {
			for c1 := range nc {
				t1 := d.next(t, c1)
				if len(t1.pcs) == 0 {
					continue // dead (a match this short is ruled out by minLen)
				}
				if !seen[t1] {
					seen[t1] = true
					next = append(next, t1)
				}
				for c2 := range nc {
					t2 := d.next(t1, c2)
					if !t2.alive() {
						continue
					}
					for c3 := range nc {
						if !d.next(t2, c3).alive() {
							continue
						}
						if budget -= len(members[c1]) * len(members[c2]) * len(members[c3]); budget < 0 {
							return
						}
						for _, b1 := range members[c1] {
							for _, b2 := range members[c2] {
								for _, b3 := range members[c3] {
									anchors[anchorHash(uint32(b1)|uint32(b2)<<8|uint32(b3)<<16)] |= 1 << (k - 1 - o)
								}
							}
						}
					}
				}
			}
		}
		level = next
	}
	p.stride, p.anchors = k, *anchors
}

// buildLiteralOwners fills litOwner with the literal rules (3 bytes or
// longer, no longer than MaxMatch) whose first three bytes leave, from
// every start state, only that rule's threads and no match. Of two such
// triples in one slot, the first rule's keeps it.
func (p *prefilter) buildLiteralOwners(s *Set) {
	for i := range p.litOwner {
		p.litOwner[i] = -1
	}
	for r, rule := range s.rules {
		if !rule.Literal || len(rule.Pattern) < 3 || len(rule.Pattern) > s.maxMatch {
			continue
		}
		owned := true
		for _, t := range s.full {
			for _, b := range []byte(rule.Pattern[:3]) {
				if t = s.dfa.next(t, int(s.classes[b])); t.match >= 0 {
					owned = false
				}
			}
			for _, pc := range t.pcs {
				owned = owned && s.prog.insts[pc].rule == int32(r)
			}
		}
		if !owned {
			continue
		}
		if slot := &p.litOwner[litSlot(rule.Pattern[:3])]; *slot < 0 {
			*slot = int32(r)
		}
	}
}

// owner returns the literal rule that alone can match at a position whose
// first three bytes are b (len(b) >= 3), or -1. The caller compares the
// rule's first three bytes with b: the slot is a hash.
func (p *prefilter) owner(b []byte) int32 { return p.litOwner[litSlot(b)] }

// next returns the first index >= i where a match may start, or len(buf).
// Where there is Teddy and the CPU runs it, Teddy scans all but the last
// teddyNeed-1 bytes. Otherwise, with a stride above 1, it first tests one
// position in stride against the anchor triples, which skips most of a
// body in few lookups. The rest of the body, or all of it, is read eight
// bytes at a time, looking up the seven byte pairs they hold in the pair
// table. Positions that hit are confirmed with the triple table.
func (p *prefilter) next(buf []byte, i int) int {
	if p.teddy != nil && useTeddy {
		// Teddy tests a position's first triple; with anchors (o > 0),
		// the one at offset o must fit a match too (bit 0).
		o := p.stride - 1
		for {
			r, m := teddyScan(p.teddy, buf[i:])
			if i += r; m == 0 {
				break // the last teddyNeed-1 bytes or fewer: the scan below
			}
			for ; m != 0; m &= m - 1 {
				j := i + bits.TrailingZeros32(m)
				if p.canStart(buf, j) && (o == 0 || p.anchors[anchorHash(binary.LittleEndian.Uint32(buf[j+o:]))]&1 != 0) {
					return j
				}
			}
			i += teddyBlock
		}
	} else if p.stride > 1 {
		var j int
		if j, i = p.nextAnchored(buf, i); j >= 0 {
			return j
		}
	}
	// The pair and triple stage, inline: with neither Teddy nor anchors
	// (short rules) nearly every call ends here, often after a few bytes.
	n := len(buf)
	pr, t, q := &p.pair, &p.triple, &p.pair7
	if i+8 <= n {
		v := buf[i:]
		for ; len(v) >= 8; v = v[7:] {
			w := binary.LittleEndian.Uint64(v)
			if q[uint16(w)&0x7F7F]|q[uint16(w>>8)&0x7F7F]|q[uint16(w>>16)&0x7F7F]|q[uint16(w>>24)&0x7F7F]|
				q[uint16(w>>32)&0x7F7F]|q[uint16(w>>40)&0x7F7F]|q[uint16(w>>48)&0x7F7F] == 0 {
				continue
			}
			m := pr[uint16(w)] | pr[uint16(w>>8)]<<1 | pr[uint16(w>>16)]<<2 | pr[uint16(w>>24)]<<3 |
				pr[uint16(w>>32)]<<4 | pr[uint16(w>>40)]<<5 | pr[uint16(w>>48)]<<6
			for i = n - len(v); m != 0; m &= m - 1 {
				k := bits.TrailingZeros8(m)
				if k < 6 {
					if t[tripleHash(uint32(w>>(8*k)))] != 0 {
						return i + k
					}
				} else if len(v) == 8 || t[tripleHash(uint32(w>>48)|uint32(v[8])<<16)] != 0 {
					return i + k
				}
			}
		}
		i = n - len(v)
	}
	for ; i+1 < n; i++ {
		if pr[uint16(buf[i])|uint16(buf[i+1])<<8] != 0 &&
			(i+2 >= n || t[tripleHash(uint32(buf[i])|uint32(buf[i+1])<<8|uint32(buf[i+2])<<16)] != 0) {
			return i
		}
	}
	if i < n && p.first[buf[i]] {
		return i
	}
	return n
}

// nextAnchored is the anchor stage of next: it returns the first start at
// or after i that passes the anchors and canStart, or -1 and the index from
// which the pair stage must go on (the positions before are ruled out).
func (p *prefilter) nextAnchored(buf []byte, i int) (j, rest int) {
	// One eight-byte load holds the triples of two anchors (stride 3:
	// offsets 0 and 3) or three (stride 2: 0, 2, 4). Their offset masks,
	// shifted by k per anchor, make one word whose bit b is a possible
	// start at a+b-k+1, in increasing order.
	n, k, q := len(buf), p.stride, &p.anchors
	a := i + k - 1
	if k == 3 && a+14 <= n { // twelve bytes, four anchors, at a time
		// w is buf[a:]: its length proves the loads in bounds.
		w := buf[a:]
		for ; len(w) >= 14; w = w[12:] {
			h0 := anchorHashes(binary.LittleEndian.Uint64(w))
			h1 := anchorHashes(binary.LittleEndian.Uint64(w[6:]))
			m0, m1 := q[h0&anchorMask], q[h0>>24&anchorMask]
			m2, m3 := q[h1&anchorMask], q[h1>>24&anchorMask]
			if m0|m1|m2|m3 == 0 {
				continue
			}
			a = n - len(w)
			hit := uint64(m0) | uint64(m1)<<3 | uint64(m2)<<6 | uint64(m3)<<9
			for ; hit != 0; hit &= hit - 1 {
				if j := a + bits.TrailingZeros64(hit) - 2; p.canStart(buf, j) {
					return j, 0
				}
			}
		}
		a = n - len(w)
	}
	if a+8 <= n {
		w := buf[a:]
		for ; len(w) >= 8; w = w[6:] {
			h := anchorHashes(binary.LittleEndian.Uint64(w))
			hit := uint64(q[h&anchorMask])
			if k == 3 {
				hit |= uint64(q[h>>24&anchorMask]) << 3
			} else {
				hit |= uint64(q[h>>16&anchorMask])<<2 | uint64(q[h>>32&anchorMask])<<4
			}
			for a = n - len(w); hit != 0; hit &= hit - 1 {
				if j := a + bits.TrailingZeros64(hit) - k + 1; p.canStart(buf, j) {
					return j, 0
				}
			}
		}
		a = n - len(w)
	}
	return -1, a - k + 1
}

// canStart reports whether the pair and triple tables let a match start at
// j; buf[j+3] must exist.
func (p *prefilter) canStart(buf []byte, j int) bool {
	x := binary.LittleEndian.Uint32(buf[j:])
	return p.pair[uint16(x)] != 0 && p.triple[tripleHash(x)] != 0
}

// tripleHash hashes the three low bytes of x (the higher byte is ignored).
func tripleHash(x uint32) uint16 {
	x &= 0xFFFFFF
	return uint16(x ^ x>>11)
}

// anchorHash hashes the three low bytes of x into anchorBits bits, so that
// the anchor table, a byte per entry and one load per test, fits the L1
// cache.
func anchorHash(x uint32) uint16 {
	x &= 0xFFFFFF
	return uint16(x^x>>9) & anchorMask
}

// anchorHashes hashes the triples of w at once: bits 8i..8i+14 of the
// result are anchorHash of bytes i..i+2 of w (i <= 5), since the hash of
// a triple reads no bit above it.
func anchorHashes(w uint64) uint64 { return w ^ w>>9 }

// litSlot is the litOwner slot of a triple.
func litSlot[T string | []byte](b T) int {
	return int(tripleHash(uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16)) & (litSlots - 1)
}
