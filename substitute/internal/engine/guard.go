package engine

import (
	"math/bits"
	"regexp/syntax"
	"slices"
	"sync"
)

// The guard keeps a hostile body linear. A stream tries its candidates one
// by one with anchored attempts (stream.go), which is fastest on real pages
// but re-reads bytes when attempts overlap and stay apart: a{1,1000}b over
// "aaaa..." runs a thousand bytes from every position, and no path memo
// helps, since the attempts' states differ by their count. When the bytes
// a stream's attempts read exceed guardRatio times the body read so far
// (plus guardSlack; each attempt counts guardAttemptCost more bytes), the
// stream turns the guard on for the rest of the body.
//
// The guard runs two more automata over the body, each once, each a lazy
// DFA over every rule at once:
//
//   - a forward scan, unanchored (it adds every rule's entry point at every
//     byte), whose match events are the positions where some match ends
//     (ends);
//   - a backward scan over the same program read backwards, unanchored at
//     its right end (it adds every rule's match instruction at every
//     byte), whose match events are the positions where some match that
//     ends at or before the scan's top starts (marks).
//
// A candidate at position j then gets an anchored attempt only if j is
// marked and some match ends in [j+minLen, j+reach], reach being the
// longest match any rule allows (at most MaxMatch). Any match an attempt
// at j can find starts at j and ends in that range, so a skipped candidate
// is one whose attempt would have found nothing: the output is the same,
// only Stream.Dropped does not count rules given up at positions skipped.
// Attempts are then made only where a match begins, and their matches are
// written, so the attempts' bytes are bounded by the body's, plus the
// overrun of a longest-match attempt past its match. That overrun is cut
// where no known match crosses (the backward scan's state is empty there:
// crossed), and, past it, where the backward state kept at a position says
// that no thread of the attempt leads on to a match (useful): a dense body
// of short matches among rules that never complete (<a beside <a [^>]*>)
// costs its attempts a few bytes each, not a stride of kept states.
//
// The scans advance in segments of at most half the rings they record
// into; a segment's backward scan starts at its top and stops where its
// state equals the state a previous scan had at the same position (sampled
// every few positions): from there down they are the same scan. So
// every byte costs one forward and about one backward transition, whatever
// the repeat counts. A candidate whose [j, j+reach] is not yet scanned (the
// end of a write) is held until more input comes, at most reach bytes.
type guard struct {
	on   bool
	from int64 // body offset the scans started at

	// The forward scan: its state before the byte at uPos.
	u    *state
	uPos int64

	// top is the highest position both scans covered: every match ending
	// at or before top has its end in ends and its start in marks. done:
	// top is the end of the body.
	top  int64
	done bool

	ends, marks []uint64 // bit rings indexed by body offset & ringMask
	// crossed: the positions whose byte some match the scans know of
	// consumes (the backward state there is not empty), a bit ring over
	// the last len(crossed)*64 positions up to top (at most crossedMax, so
	// that a large MaxMatch does not grow it: the positions below count as
	// crossed). No match from a candidate ends past the first position
	// above it that is not crossed (guard.cut).
	crossed     []uint64
	crossedMask int64
	// rules: at a marked position p, slot p&rulesMask, the least rule
	// whose match starts there (255: 255 or more), for guard.decided; nil
	// where it cannot help (guardAutomata.rules). It covers half a ring,
	// the most a scan covers past the candidate that runs it (advance),
	// and scans run downwards: a position's slot is written last by the
	// position itself, as long as it is a candidate to come.
	rules     []uint8
	rulesMask int64
	ringMask  int64
	endPos    int64 // no end lies in [the last query, endPos)

	revAt  []*state // backward state at every stride-th position
	revPos []int64  // the position each was taken at
	stride int64
	// Set with the rings, for the scans and attempts to index revAt
	// without working them out per call: a position q's slot is
	// q>>strideShift&slotMask.
	slotMask, strideMask int64
	strideShift          uint8
}

const (
	// guardRatio and guardSlack: attempts may read this many times the
	// body, plus this many bytes, before the guard turns on. Real pages
	// read well under one byte of attempt per byte of body.
	guardRatio = 4
	guardSlack = 64 << 10
	// guardAttemptCost is what an attempt costs beyond its bytes (finding
	// the candidate, starting the attempt), in bytes' worth.
	guardAttemptCost = 16
	// guardWindow bounds how much new input a guarded stream takes in one
	// round (on top of MaxMatch held), instead of holdSlack.
	guardWindow = 64 << 10
	// revStride is the least distance between the backward scan's kept
	// states (guardAutomata.stride), revSlots the most it keeps.
	revStride = 16
	revSlots  = 2048
	// crossedMax bounds the positions guard.crossed covers (8 KiB): the
	// whole ring up to the default MaxMatch.
	crossedMax = 64 << 10
	// rulesMax bounds the positions guard.rules covers (32 KiB): half
	// the ring up to the default MaxMatch. Past it, no guard.decided.
	rulesMax = 32 << 10
)

// guardMode: when a stream's guard turns on.
type guardMode uint8

const (
	guardAuto   guardMode = iota // when attempts read too much (guardRatio)
	guardAlways                  // from the first byte
	guardNever
)

// guardAutomata are a Set's forward and backward scans, built on first use
// (most sets never meet a hostile body).
type guardAutomata struct {
	once    sync.Once
	fwd     *dfa
	bwd     *dfa
	fStart  [4]*state // by prevClass of the byte before
	bEmpty  [4]*state // no thread, by prevClass of the byte after (end of body: 0)
	reach   int       // longest match, at most MaxMatch
	crossed int       // positions guard.crossed covers, a power of two
	// exact: one rule, whose matches all fit MaxMatch (guard.only).
	exact bool
	// fits, by rule below 255: all its matches fit MaxMatch
	// (guard.decided; an array, read without a bounds check).
	fits [256]bool
	// rules: positions guard.rules covers, half the ring (0: none).
	rules  int
	ring   int // ring size in positions, a power of two
	stride int // positions between kept backward states, a power of two
}

func (s *Set) guardAutomata() *guardAutomata {
	g := &s.guardA
	g.once.Do(func() {
		// Each gets a cache of CacheSize: their states hold the threads
		// of many starts at once, and are larger than the attempts'.
		limit := s.cacheSize
		rep := s.dfa.classRep
		g.fwd = newDFA(&s.prog, false, &s.classes, rep, limit)
		g.fwd.inject = append([]uint32(nil), s.prog.start...)
		g.bwd = newDFA(&s.prog, false, &s.classes, rep, limit)
		g.bwd.rev = newRevGraph(&s.prog)
		for pc, in := range s.prog.insts {
			if in.op == opMatch {
				g.bwd.rev.ends = append(g.bwd.rev.ends, uint32(pc))
			}
		}
		for p := range 4 {
			g.fStart[p] = g.fwd.pinned1(startFlags[p], g.fwd.inject)
			g.bEmpty[p] = g.bwd.pinned1(startFlags[p], nil)
			// After a byte, the forward scan is idle in these: no
			// thread alive (advance skips with the prefilter). Set
			// before any stream can read the states.
			g.fStart[p].idle = p > 0
			g.fStart[p].event = p > 0
		}
		g.reach = min(s.maxMatch, s.prog.longest())
		g.exact = len(s.rules) == 1 && s.prog.longest() <= s.maxMatch
		for r, n := range s.prog.longestEach()[:min(len(s.rules), 255)] {
			g.fits[r] = n <= s.maxMatch
		}
		// A segment covers a candidate's reach: half a ring.
		g.ring = max(4096, 1<<bits.Len(uint(2*(g.reach+2))))
		if s.guardRing > 0 {
			g.ring = max(s.guardRing, 128, 1<<bits.Len(uint(2*(g.reach+2))))
		}
		g.stride = max(revStride, g.ring/revSlots)
		g.crossed = min(g.ring, crossedMax)
		if s.guardCrossed > 0 {
			g.crossed = min(g.ring, max(64, s.guardCrossed))
		}
		// guard.decided: for a set that guard.only does not decide, and
		// some rule of which fits MaxMatch.
		if g.ring/2 <= rulesMax && !g.exact && slices.Contains(g.fits[:], true) {
			g.rules = g.ring / 2
		}
	})
	return g
}

// pinned1 interns the state (flags, no match, pcs) and keeps it across
// cache resets.
func (d *dfa) pinned1(flags uint8, pcs []uint32) *state {
	d.mu.Lock()
	defer d.mu.Unlock()
	pcs = d.dedup(append(d.out[:0], pcs...))
	d.out = pcs
	s := d.intern(flags, -1, pcs)
	d.pinned = append(d.pinned, s)
	return s
}

// restart starts both scans afresh at body offset pos, after a byte of
// class prev.
func (g *guard) restart(a *guardAutomata, pos int64, prev int) {
	if g.ends == nil {
		g.ends = make([]uint64, a.ring/64)
		g.marks = make([]uint64, a.ring/64)
		g.crossed = make([]uint64, a.crossed/64)
		g.crossedMask = int64(a.crossed - 1)
		g.revAt = make([]*state, a.ring/a.stride)
		g.revPos = make([]int64, a.ring/a.stride)
		g.stride = int64(a.stride)
		g.ringMask = int64(a.ring - 1)
		g.slotMask, g.strideMask = int64(len(g.revAt)-1), g.stride-1
		g.strideShift = uint8(bits.TrailingZeros64(uint64(g.stride)))
		if a.rules > 0 {
			g.rules = make([]uint8, a.rules)
			g.rulesMask = int64(a.rules - 1)
		}
	}
	g.on = true
	g.from, g.uPos, g.top, g.done, g.endPos = pos, pos, pos-1, false, pos
	g.u = a.fStart[prev]
	for i := range g.revPos {
		g.revPos[i] = -1
	}
	clear(g.revAt)
}

func (g *guard) bit(ring []uint64, p int64) bool {
	p &= g.ringMask
	return ring[p>>6]&(1<<(p&63)) != 0
}

func (g *guard) set(ring []uint64, p int64) {
	p &= g.ringMask
	ring[p>>6] |= 1 << (p & 63)
}

// clearRange clears positions [lo, hi) of ring (hi-lo at most its size),
// a word at a time.
func (g *guard) clearRange(ring []uint64, lo, hi int64) {
	clearBits(ring, g.ringMask, lo, hi)
}

// clearBits clears positions [lo, hi) of a bit ring of mask+1 positions.
func clearBits(ring []uint64, mask, lo, hi int64) {
	hi = min(hi, lo+mask+1)
	for lo < hi {
		q := lo & mask
		b := q & 63
		n := min(64-b, hi-lo) // positions in this word, 1 to 64
		ring[q>>6] &^= ^uint64(0) >> (64 - n) << b
		lo += n
	}
}

// nextEnd returns the first end at or after lo that the scans know of, or
// top+1. Queries come with lo never decreasing, so the ring is read once.
func (g *guard) nextEnd(lo int64) int64 {
	if g.endPos < lo {
		g.endPos = lo
	}
	for g.endPos <= g.top {
		q := g.endPos & g.ringMask
		w := g.ends[q>>6] >> (q & 63)
		if w != 0 {
			g.endPos += int64(bits.TrailingZeros64(w))
			if g.endPos > g.top {
				break
			}
			return g.endPos
		}
		g.endPos += 64 - q&63
	}
	g.endPos = min(g.endPos, g.top+1)
	return g.endPos
}

// run runs attempt a, anchored at buf[j], from state t over buf[k:] like
// Set.runPlain, and also stops, alive (runSettled), once no match event
// is left for it: after buf[soft], the last end in reach, or where the
// backward scan's state, kept at that position, says that no thread of
// the attempt can complete a match. soft is -1 when the scans do not
// cover the attempt's reach yet (a match may end past top): then it runs
// as runPlain.
func (g *guard) run(s *Set, a *attempt, t *state, buf []byte, j, k, soft int, delta int64) (*state, int, int) {
	limit := j + s.maxMatch // the last byte the attempt may consume
	slotMask, strideMask, shift := g.slotMask, g.strideMask, g.strideShift
	for ; uint(k) < uint(len(buf)); k++ { // unsigned: no bounds check on buf[k]
		// s.step, inlined: guarded attempts are short, a call per byte
		// is a good part of their cost.
		c := int(s.classes[buf[k]])
		n := t.to(c)
		if n == nil {
			n = s.dfa.build(t, c)
		}
		t = n
		if t.match >= 0 {
			a.bestLen, a.bestRule = k-j, t.match
		}
		if t.empty {
			return t, k, runDead
		}
		if k == limit {
			return t, k, runLimit
		}
		if k == soft {
			return t, k, runSettled
		}
		// A kept state is tested only where it can save more steps than
		// the test costs (a few): an attempt near its last end runs on.
		if q := int64(k) + delta; k+usefulMin < soft && q&strideMask == 0 && q <= g.top {
			if slot := q >> (shift & 63) & slotMask; g.revPos[slot] == q && !g.useful(t, g.revAt[slot]) {
				return t, k, runSettled
			}
		}
	}
	return t, k, runStarved
}

// usefulMin is the least number of steps left before soft for which
// guard.run tests a kept backward state: a test costs about as much as that.
const usefulMin = 4

// useful reports whether some thread of t, the forward state after the
// byte at a position q, can still complete a match the scans know of: b,
// the backward state at q, holds the byte instructions that read that
// byte and lead on to a match, and b.outs where they lead.
func (g *guard) useful(t, b *state) bool {
	if b.dense {
		for _, pc := range t.pcs {
			if b.outs[pc>>5]&(1<<(pc&31)) != 0 {
				return true
			}
		}
		return false
	}
	for _, pc := range t.pcs {
		if _, ok := slices.BinarySearch(b.outs, pc); ok {
			return true
		}
	}
	return false
}

// settled reports whether attempt a, alive in state t past the last
// position where any of its matches can end, has its outcome: no match
// (nothing can match any more), or a best match whose rule has no thread
// left in t, so that it cannot be given up at MaxMatch (under Longest the
// other rules can only lose; under First, rules before it never matched
// and rules after it were cut or lose to it).
func (g *guard) settled(s *Set, a *attempt, t *state) bool {
	if a.bestLen < 0 {
		return true
	}
	for _, pc := range t.pcs {
		if s.prog.insts[pc].rule == a.bestRule {
			return false
		}
	}
	return true
}

// cut returns the first position in [lo, hi] that no match the scans know
// of crosses (see crossed), or hi+1. Every match from a candidate below lo
// that ends in reach ends at or before it: a match crossing the position
// would have its thread in the backward state there.
func (g *guard) cut(lo, hi int64) int64 {
	// Below the window, a position counts as crossed.
	for p := max(lo, g.top-g.crossedMask); p <= hi; {
		q := p & g.crossedMask
		if w := ^g.crossed[q>>6] >> (q & 63); w != 0 {
			return min(p+int64(bits.TrailingZeros64(w)), hi+1)
		}
		p += 64 - q&63
	}
	return hi + 1
}

// nextMark returns the first marked position at or after lo, or top+1.
func (g *guard) nextMark(lo int64) int64 {
	for p := lo; p <= g.top; {
		q := p & g.ringMask
		if w := g.marks[q>>6] >> (q & 63); w != 0 {
			p += int64(bits.TrailingZeros64(w))
			return min(p, g.top+1)
		}
		p += 64 - q&63
	}
	return g.top + 1
}

// worth reports whether the candidate at body offset j can begin a match
// the scans know of: j is marked and a match ends in [j+minLen, j+reach].
// It returns the first such end.
func (g *guard) worth(s *Set, j int64) (int64, bool) {
	if !g.bit(g.marks, j) {
		return 0, false
	}
	e := g.nextEnd(j + int64(s.minLen))
	return e, e <= g.top && e <= j+int64(s.guardA.reach)
}

// only returns the end of the match that begins at the candidate at body
// offset j (worth said yes), if the scans alone decide it: with a single
// rule (exact), active, whose matches all fit MaxMatch, a marked j begins
// a match ending at a known end in [j+minLen, j+reach], and every match
// from j ends at one; when there is one such end, that is the match,
// whatever the priority, and no rule can be given up at MaxMatch. On a
// body of long matches (a{1,1000}b over runs of a) this saves the attempt
// re-reading each match.
func (g *guard) only(s *Set, j int64) (int64, bool) {
	if !s.guardA.exact {
		return 0, false
	}
	return g.onlyEnd(s, j)
}

// onlyEnd is only for a Set whose guardAutomata are exact.
func (g *guard) onlyEnd(s *Set, j int64) (int64, bool) {
	e := g.nextEnd(j + int64(s.minLen))
	return e, g.prevEnd(min(j+int64(s.guardA.reach), g.top), e+1) < 0
}

// decided returns the match that begins at the candidate at body offset
// j (worth said yes), its end and rule, if the scans alone decide it, for
// a stream with every rule active: when the first position above j that
// no known match crosses (cut) lies in reach, every match from j ends at
// or before it; if one end lies in [j+minLen, that position], every match
// from j ends there, and the least rule whose match starts at j (kept by
// the backward scan at the mark) is the one both priorities take. It
// must be a rule whose matches all fit MaxMatch: no thread of it can then
// be alive at MaxMatch, where the rule would be dropped and its match
// lost. Other rules dropped there change nothing but Stream.Dropped,
// which counts only attempts. On a body dense with short matches among
// many rules (a match every 8 bytes) this saves each match its attempt.
// e is the first end in [j+minLen, j+reach] (worth).
func (g *guard) decided(s *Set, j, e int64) (int64, int32, bool) {
	if g.rules == nil {
		return 0, 0, false
	}
	r := g.rules[j&g.rulesMask]
	if !s.guardA.fits[r] {
		return 0, 0, false
	}
	hi := min(j+int64(s.guardA.reach), g.top)
	c := g.cut(j+1, hi)
	if c > hi || e > c || g.prevEnd(c, e+1) >= 0 {
		return 0, 0, false
	}
	return e, int32(r), true
}

// covered reports whether the scans cover the reach of the candidate at
// body offset pos (cover has nothing to do): small enough to inline, where
// a call of cover per candidate measured several percent on dense bodies.
func (g *guard) covered(reach int, pos int64) bool {
	return g.done || g.top >= pos+int64(reach)
}

// cover advances the scans over buf until every match that could start at
// buf[j] is known, and reports whether that was possible (false: the
// input ends before). buf[i] is at body offset i+delta; prev is the byte
// before buf[0] (-1: none).
func (g *guard) cover(s *Set, buf []byte, j int, prev int, final bool, delta int64) bool {
	a := &s.guardA
	need := int64(j) + delta + int64(a.reach)
	for !g.done && g.top < need {
		ui := int(g.uPos - delta)
		if ui >= len(buf) && !final {
			return false
		}
		g.advance(a, s.pre, buf, j, prev, final, delta)
	}
	return true
}

// advance runs both scans over the next segment of buf, at most half a
// ring past buf[j].
func (g *guard) advance(a *guardAutomata, pre *prefilter, buf []byte, j int, prev int, final bool, delta int64) {
	ui := int(g.uPos - delta)
	hi := min(len(buf), j+a.ring/2)
	g.clearRange(g.ends, g.uPos, int64(hi)+delta+1)
	t := g.u
	fwd := a.fwd
	classes := fwd.classes
	seg := buf[:hi] // the loop reads seg[k] without a bounds check
	for k := ui; uint(k) < uint(len(seg)); k++ {
		c := int(classes[seg[k]])
		n := t.to(c)
		if n == nil {
			n = fwd.build(t, c)
		}
		t = n
		if !t.event {
			continue // the common case, one test
		}
		if t.match >= 0 {
			g.set(g.ends, int64(k)+delta)
		} else if t.idle {
			// No thread is alive: skip to where one may begin.
			if q := min(pre.next(buf, k+1), hi); q > k+1 {
				t = a.fStart[prevClass(int(seg[q-1]))]
				k = q - 1
			}
		}
	}
	g.u = t
	g.uPos = int64(hi) + delta
	top := g.uPos - 1
	if final && hi == len(buf) {
		top = g.uPos
		if fwd.eofMatch(t) >= 0 {
			g.set(g.ends, top)
		}
		g.done = true
	}
	g.clearRange(g.marks, g.top+1, top+1)
	clearBits(g.crossed, g.crossedMask, max(g.top+1, top-g.crossedMask), top+1)
	g.back(a, buf, prev, top, max(int64(j)+delta, g.from), delta)
	g.top = top
}

// back runs the backward scan from position top down to position lo,
// adding the match instructions where a match ends and marking where one
// starts. Its state at a position holds what every match ending at or
// before top needs there, so it contains the state of an earlier scan
// (whose top was lower) at the same position; where the two are equal (or
// this one is empty) below the earlier top, the earlier scan's marks are
// this one's, and it stops. Where its state is empty above that, it jumps
// to the next end below.
func (g *guard) back(a *guardAutomata, buf []byte, prev int, top, lo int64, delta int64) {
	old := g.top
	bwd := a.bwd
	byteAt := func(p int64) int { // the byte at body offset p, -1 past the end
		if i := p - delta; i >= int64(len(buf)) {
			return -1
		} else if i >= 0 {
			return int(buf[i])
		}
		return prev
	}
	inject := len(bwd.classRep)
	slotMask, strideMask, shift := g.slotMask, g.strideMask, g.strideShift
	classes := bwd.classes
	crossedLo := top - g.crossedMask
	union := func(t *state) *state { // t where a match ends
		n := t.to(inject)
		if n == nil {
			n = bwd.union(t, inject)
		}
		return n
	}
	t := a.bEmpty[0] // empty: the scan starts at the first end
	for p := top; p >= lo; p-- {
		if t.empty {
			// Empty: below the earlier top, the earlier scan's marks
			// stand; above it, go on at the next end.
			e := g.prevEnd(p, max(lo, old+1))
			if e < 0 {
				return
			}
			p = e
			t = union(a.bEmpty[prevClass(byteAt(p))])
		} else {
			if p >= crossedLo {
				q := p & g.crossedMask
				g.crossed[q>>6] |= 1 << (q & 63)
			}
			if g.bit(g.ends, p) {
				t = union(t)
			}
		}
		if p == 0 {
			if r := bwd.eofMatch(t); r >= 0 {
				g.mark(0, r)
			}
			return
		}
		// The byte before p: in buf but for the first of a body's
		// segments (prev) or past its end.
		var b byte
		if i := p - 1 - delta; uint64(i) < uint64(len(buf)) {
			b = buf[i]
		} else {
			b = byte(byteAt(p - 1))
		}
		c := int(classes[b])
		n := t.to(c)
		if n == nil {
			n = bwd.build(t, c)
		}
		t = n
		if t.match >= 0 {
			g.mark(p, t.match)
		}
		if q := p - 1; q&strideMask == 0 && !t.empty {
			slot := q >> (shift & 63) & slotMask
			if q <= old && g.revPos[slot] == q && g.revAt[slot] == t {
				return
			}
			g.revAt[slot], g.revPos[slot] = t, q
		}
	}
}

// mark records that a match of rule r, the least such, starts at p.
func (g *guard) mark(p int64, r int32) {
	g.set(g.marks, p)
	if g.rules != nil {
		g.rules[p&g.rulesMask] = uint8(min(r, 255))
	}
}

// prevEnd returns the last end in [lo, p], or -1.
func (g *guard) prevEnd(p, lo int64) int64 {
	for p >= lo {
		q := p & g.ringMask
		w := g.ends[q>>6] << (63 - q&63)
		if w != 0 {
			p -= int64(bits.LeadingZeros64(w))
			if p < lo {
				return -1
			}
			return p
		}
		p -= q&63 + 1
	}
	return -1
}

// union returns t with the match instructions added (a match may end
// where t is), and caches it in t's extra transition slot.
func (d *dfa) union(t *state, slot int) *state {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := t.next[slot].Load(); n != nil {
		return n
	}
	pcs := d.dedup(append(append(d.out[:0], t.pcs...), d.rev.ends...))
	d.out = pcs
	n := d.intern(t.flags, t.match, pcs)
	t.next[slot].Store(n)
	return n
}

// revGraph is what the backward scan follows: the predecessors of every
// instruction, and the rule whose entry point each instruction is.
type revGraph struct {
	ends    []uint32 // the match instructions, added where a match ends
	preds   [][]uint32
	startOf []int32 // rule+1, 0 if the instruction is no entry point
}

// outsOf returns where the byte instructions among pcs lead: sorted, or,
// with dense true, as a bit set over the program's instructions when that
// is the smaller (a state of a bounded repeat holds a thread per count,
// and useful then tests each of an attempt's threads with one load, not a
// binary search over cold memory).
func (g *revGraph) outsOf(p *nfa, pcs []uint32) (outs []uint32, dense bool) {
	for _, pc := range pcs {
		if in := &p.insts[pc]; in.op == opByte {
			outs = append(outs, in.out)
		}
	}
	slices.Sort(outs)
	outs = slices.Compact(outs)
	if words := (len(p.insts) + 31) / 32; words < len(outs) {
		set := make([]uint32, words)
		for _, pc := range outs {
			set[pc>>5] |= 1 << (pc & 31)
		}
		return set, true
	}
	return outs, false
}

func newRevGraph(p *nfa) *revGraph {
	g := &revGraph{preds: make([][]uint32, len(p.insts)), startOf: make([]int32, len(p.insts))}
	for pc, in := range p.insts {
		switch in.op {
		case opByte, opNop, opEmpty:
			g.preds[in.out] = append(g.preds[in.out], uint32(pc))
		case opSplit:
			g.preds[in.out] = append(g.preds[in.out], uint32(pc))
			g.preds[in.out1] = append(g.preds[in.out1], uint32(pc))
		}
	}
	for r, pc := range p.start {
		g.startOf[pc] = int32(r) + 1
	}
	return g
}

// stepRev is step read backwards. A backward state at position p holds
// instructions from which a match can be completed reading forward from
// p, and flags says what the byte after p is (flagStart: none, the end of
// the body). Reading b, the byte before p, it follows predecessors through
// the zero-width instructions the context at p allows, reports the rule
// whose entry point it reaches (a match starts at p), and collects into
// d.out the byte instructions that consume b: they hold at p-1.
func (d *dfa) stepRev(flags uint8, pcs []uint32, b int) int32 {
	ctx := emptyContextRev(flags, b)
	insts := d.prog.insts
	d.visited = d.visited[:0]
	d.out = d.out[:0]
	match := int32(-1)
	d.stack = append(d.stack[:0], pcs...)
	for len(d.stack) > 0 {
		pc := d.stack[len(d.stack)-1]
		d.stack = d.stack[:len(d.stack)-1]
		if i := d.index[pc]; int(i) < len(d.visited) && d.visited[i] == pc {
			continue
		}
		d.index[pc] = uint32(len(d.visited))
		d.visited = append(d.visited, pc)
		if r := d.rev.startOf[pc] - 1; r >= 0 && (match < 0 || r < match) {
			match = r
		}
		for _, m := range d.rev.preds[pc] {
			in := &insts[m]
			switch in.op {
			case opByte:
				if b >= 0 && in.lo <= byte(b) && byte(b) <= in.hi {
					d.out = append(d.out, m)
				}
			case opSplit, opNop:
				d.stack = append(d.stack, m)
			case opEmpty:
				if in.empty&^ctx == 0 {
					d.stack = append(d.stack, m)
				}
			}
		}
	}
	return match
}

// emptyContextRev is emptyContext for the backward scan: after describes
// the byte after the position (flagStart: the end of the body) and before
// is the byte before it (-1: the start of the body).
func emptyContextRev(after uint8, before int) syntax.EmptyOp {
	var op syntax.EmptyOp
	if before < 0 {
		op |= syntax.EmptyBeginText | syntax.EmptyBeginLine
	} else if before == '\n' {
		op |= syntax.EmptyBeginLine
	}
	if after&flagStart != 0 {
		op |= syntax.EmptyEndText | syntax.EmptyEndLine
	} else if after&flagNL != 0 {
		op |= syntax.EmptyEndLine
	}
	if (after&flagWord != 0) != (before >= 0 && isWordByte(byte(before))) {
		op |= syntax.EmptyWordBoundary
	} else {
		op |= syntax.EmptyNoWordBoundary
	}
	return op
}

// longest returns the most bytes a match of any rule can hold, or
// unbounded if some rule can repeat (the program has a loop).
func (p *nfa) longest() int {
	best := 0
	for _, n := range p.longestEach() {
		best = max(best, n)
	}
	return best
}

// longestEach returns longest for each rule alone.
func (p *nfa) longestEach() []int {
	const (
		unvisited = iota
		inProgress
		finished
	)
	mark := make([]uint8, len(p.insts))
	val := make([]int, len(p.insts)) // -1: no way to a match
	var walk func(pc uint32) int
	walk = func(pc uint32) int {
		switch mark[pc] {
		case inProgress:
			return unbounded // a loop
		case finished:
			return val[pc]
		}
		mark[pc] = inProgress
		in := &p.insts[pc]
		n := -1
		switch in.op {
		case opByte:
			if m := walk(in.out); m >= 0 {
				n = min(1+m, unbounded)
			}
		case opSplit:
			n = max(walk(in.out), walk(in.out1))
		case opNop, opEmpty:
			n = walk(in.out)
		case opMatch:
			n = 0
		}
		mark[pc], val[pc] = finished, n
		return n
	}
	each := make([]int, len(p.start))
	for r, pc := range p.start {
		each[r] = max(0, walk(pc))
	}
	return each
}

// unbounded is longest's answer for a rule that can repeat without bound.
const unbounded = 1 << 40
