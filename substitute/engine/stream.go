package engine

import (
	"encoding/binary"
	"io"
	"math/bits"
)

// Vars resolves a {name} placeholder of a replacement. A nil Vars, or ok
// false, leaves "{name}" in the output as written. Values are inserted
// verbatim: a $ inside them is never expanded.
type Vars func(name string) (value string, ok bool)

// Stream substitutes one body. Write the body in chunks of any size; the
// output is the same whatever the chunk boundaries. A Stream is not safe for
// concurrent use; reuse it with Reset.
type Stream struct {
	set  *Set
	dst  io.Writer
	vars Vars
	err  error

	active   Mask // rules taking part
	all      bool // active holds every rule (use the Set's start states)
	none     bool // no rule left: pass everything through
	starts   [4]*state
	matched  Mask
	scratch  Mask
	dropped  int
	attempts attemptCounter // match attempts started (enginestats builds only)

	// hold[0] is the byte before the pending bytes hold[1:] (valid when
	// prev >= 0). Pending bytes are those of a match attempt still running;
	// there are at most MaxMatch of them. hold grows as an attempt needs it,
	// up to holdMax: a stream that holds little costs little, whatever
	// MaxMatch.
	hold    []byte
	holdMax int // 1 + MaxMatch + holdSlack
	prev    int // byte before the unprocessed input, -1 at the start

	// The match attempt in progress, anchored at the first pending byte.
	running  bool
	runState *state
	runLen   int   // bytes the attempt has consumed
	runPrev  int   // prevClass of the byte before the attempt
	bestLen  int   // length of the best match so far, -1 if none
	bestRule int32 // its rule

	idx []int // submatch offsets
	// base is the offset in the body of the first byte process is given.
	base int64

	// The memo path: that of the attempt run furthest (see pathMemo).
	// Positions are body offsets; the state at position p is the one
	// before byte p.
	ring    []*state // ring[p & (len-1)] for p in [ringLo, ringHi]
	ownRing []*state // the running attempt's own states, same indexing
	// The path's states every sparseStride positions as far as it was run,
	// in slots (p / sparseStride) % len, for attempts that meet it late.
	sparse      []*state
	ownSparse   []*state
	sparseHi    int64 // last position sparse holds (from ringLo on)
	ownSparseHi int64
	ringLo      int64
	ringHi      int64
	memoOK      bool   // the path is usable
	memoEnd     int64  // last byte the path was run over
	memoLimit   *state // its state after memoEnd; nil if it died there
	memoMatch   int64  // position of its last match event (-1: none)
	memoRule    int32  // the rule of that event
	// The running attempt's side of the memo (its last match event is its
	// best match, bestLen and bestRule).
	merged bool  // it joined the path (ring then describes its path)
	ownHi  int64 // last position it wrote to the ring before joining

	varVals  [][]byte
	varKnown []uint8 // 0: not looked up yet, 1: value, 2: unknown
}

// holdSlack is how much new input a stream copies next to pending bytes at a
// time.
const holdSlack = 256

// A stream's hold starts at holdInitial bytes (or less, for a small
// MaxMatch), and Reset gives back a hold grown past holdRetain, so that a
// pooled stream does not keep a long attempt's bytes for every later body.
const (
	holdInitial = 4 << 10
	holdRetain  = 64 << 10
)

// NewStream returns a stream that writes the substituted body to dst.
func (s *Set) NewStream(dst io.Writer, vars Vars) *Stream {
	st := &Stream{
		set:       s,
		active:    NewMask(len(s.rules)),
		matched:   NewMask(len(s.rules)),
		scratch:   NewMask(len(s.rules)),
		holdMax:   1 + s.maxMatch + holdSlack,
		varVals:   make([][]byte, len(s.varNames)),
		varKnown:  make([]uint8, len(s.varNames)),
		idx:       make([]int, s.maxCap),
		ring:      make([]*state, s.ringSize),
		ownRing:   make([]*state, s.ringSize),
		sparse:    make([]*state, s.sparseSlots),
		ownSparse: make([]*state, s.sparseSlots),
	}
	st.Reset(dst, vars)
	return st
}

// Reset prepares the stream for a new body, keeping its memory.
func (st *Stream) Reset(dst io.Writer, vars Vars) {
	st.dst, st.vars, st.err = dst, vars, nil
	copy(st.active, st.set.all)
	st.all, st.none = true, false
	st.starts = [4]*state{}
	clear(st.matched)
	st.dropped = 0
	st.attempts.reset()
	if cap(st.hold) > holdRetain || st.hold == nil {
		st.hold = make([]byte, 1, min(holdInitial, st.holdMax))
	}
	st.hold = st.hold[:1]
	st.prev = -1
	st.base = 0
	st.memoOK = false
	clear(st.ring) // let old states be collected after cache resets
	clear(st.ownRing)
	clear(st.sparse)
	clear(st.ownSparse)
	st.running = false
	for i := range st.varVals {
		st.varVals[i] = st.varVals[i][:0]
	}
	clear(st.varKnown)
}

// Restrict limits matching to the rules in active (for example the rules a
// previous response of the same resource used). Call it before the first
// Write.
func (st *Stream) Restrict(active Mask) {
	for i := range st.active {
		var w uint64
		if i < len(active) {
			w = active[i]
		}
		st.active[i] = st.set.all[i] & w
	}
	st.activeChanged()
}

func (st *Stream) activeChanged() {
	st.all = st.active.Equal(st.set.all)
	st.none = st.active.Empty()
	st.starts = [4]*state{}
}

// Matched returns the rules that matched so far. The mask belongs to the
// stream and is valid until the next Reset; Clone it to keep it.
func (st *Stream) Matched() Mask { return st.matched }

// Dropped returns how many candidates were dropped because they would have
// grown past MaxMatch bytes.
func (st *Stream) Dropped() int { return st.dropped }

// Write substitutes p. Everything that cannot be part of a match is written
// to dst before Write returns; the rest (at most MaxMatch bytes) is held.
func (st *Stream) Write(p []byte) (int, error) {
	if st.err != nil {
		return 0, st.err
	}
	n := len(p)
	for len(p) > 0 && st.err == nil {
		if !st.running {
			k := st.process(p, 0, false)
			st.keep(p, k)
			break
		}
		m := min(max(st.holdMax, cap(st.hold))-len(st.hold), len(p))
		st.hold = st.grow(m)
		st.hold = append(st.hold, p[:m]...)
		p = p[m:]
		st.keep(st.hold, st.process(st.hold, 1, false))
	}
	if st.err != nil {
		return 0, st.err
	}
	return n, nil
}

// Err returns the first error writing to dst, if any. There is nothing to
// flush: Write already writes out everything that cannot be part of a match.
func (st *Stream) Err() error { return st.err }

// Close ends the input: matches that need the end of the body ($, \z, \b)
// are decided and every held byte is written.
func (st *Stream) Close() error {
	if st.err == nil && st.running {
		st.keep(st.hold, st.process(st.hold, 1, true))
	}
	st.running = false
	st.hold = st.hold[:1]
	return st.err
}

// grow returns st.hold with room for n more bytes, doubling its capacity
// as needed (never past holdMax, which bounds what Write appends).
func (st *Stream) grow(n int) []byte {
	need := len(st.hold) + n
	if need <= cap(st.hold) {
		return st.hold
	}
	c := min(max(2*cap(st.hold), need), st.holdMax)
	c = max(c, need)
	h := make([]byte, len(st.hold), c)
	copy(h, st.hold)
	return h
}

// keep saves buf[k:], the pending bytes, in st.hold.
func (st *Stream) keep(buf []byte, k int) {
	fromHold := len(buf) > 0 && len(st.hold) > 0 && &buf[0] == &st.hold[0]
	start := 0
	if fromHold {
		start = 1
	}
	if k > start {
		st.prev = int(buf[k-1])
	}
	st.base += int64(k - start)
	if fromHold {
		n := copy(st.hold[1:], st.hold[k:])
		st.hold = st.hold[:1+n]
	} else {
		st.hold = st.hold[:1]
		st.hold = st.grow(len(buf) - k)
		st.hold = append(st.hold, buf[k:]...)
	}
	st.hold[0] = byte(st.prev)
}

func (st *Stream) write(b []byte) {
	if len(b) == 0 || st.err != nil {
		return
	}
	_, st.err = st.dst.Write(b)
}

// process scans buf[start:], writing out what it resolves, and returns the
// index of the first pending byte (len(buf) if none). If a match attempt is
// running, it is anchored at buf[start]. final means no input follows.
func (st *Stream) process(buf []byte, start int, final bool) int {
	s := st.set
	emit, i := start, start
	for st.err == nil {
		j := start
		if !st.running {
			if st.none {
				break
			}
			j = s.candidate(buf, i)
			if j >= len(buf) {
				break
			}
			st.attempts.add()
			if !st.literal(buf, j) {
				st.running = true
				st.runPrev = prevClass(st.prevByte(buf, start, j))
				st.runState = st.startState(st.runPrev)
				st.runLen, st.bestLen = 0, -1
				st.beginAttempt(buf, start, j)
			}
		}
		if st.running && !st.advance(buf, start, j, final) {
			st.write(buf[emit:j])
			return j
		}
		st.running = false
		if st.bestLen < 0 {
			i = j + 1
			continue
		}
		e := j + st.bestLen
		st.write(buf[emit:j])
		st.replace(buf, start, j, e, int(st.bestRule))
		emit, i = e, e
	}
	st.write(buf[emit:])
	return len(buf)
}

// literal decides the attempt at buf[j] without running the DFA when its
// first three bytes are those of a literal rule that, from there, alone can
// match (litOwner): the literal is compared with the text in one go. (On
// the wrk benchmark's page about half the attempts are of this kind:
// "rustc" against "rust" and "rustup".) It reports whether it decided, with
// the result in st.bestLen (-1: no match) and st.bestRule; if not (another
// triple in the slot, or the text not all in buf), the attempt is run as
// usual. The memo path is left alone: it records a DFA run of its own,
// which an attempt not run cannot change.
func (st *Stream) literal(buf []byte, j int) bool {
	s := st.set
	if j+3 > len(buf) {
		return false
	}
	r := s.litOwner[litSlot(buf[j:j+3])]
	if r < 0 || !st.active.Has(int(r)) {
		return false
	}
	lit := s.rules[r].Pattern
	if string(buf[j:j+3]) != lit[:3] || j+len(lit) > len(buf) {
		return false
	}
	st.bestLen, st.bestRule = -1, r
	if string(buf[j+3:j+len(lit)]) == lit[3:] {
		st.bestLen = len(lit)
	}
	return true
}

func (st *Stream) prevByte(buf []byte, start, j int) int {
	if j > start {
		return int(buf[j-1])
	}
	return st.prev
}

func (st *Stream) startState(pc int) *state {
	if st.all {
		return st.set.full[pc]
	}
	if st.starts[pc] == nil {
		st.starts[pc] = st.set.dfa.start(st.active, pc, false)
	}
	return st.starts[pc]
}

// Why a DFA run stopped.
const (
	runDead    = iota // no thread left: the attempt is resolved
	runLimit          // threads alive after MaxMatch+1 bytes
	runStarved        // out of input
	runMerged         // joined the memo path
)

// pathMemo: attempts are anchored, so after an attempt the next candidate
// reads again bytes the last one read. Two attempts in the same DFA state
// at the same position go on identically from there. So the stream keeps
// the path of the attempt run furthest (a resolved attempt replaces it if
// it joined it or stopped no earlier): its state at each of the next
// len(ring) positions, how far it was run (memoEnd), its state there
// (memoLimit, or nil if it died), and its last match event; plus its state
// every sparseStride positions as far as it was run, for attempts that
// meet it later than len(ring) bytes after their start. An attempt
// compares its state with the path at every byte; once they agree at a
// position p <= memoEnd, its fate up to memoEnd is the path's: it inherits
// the path's last match event after p, and either dies where the path died
// or jumps to memoEnd+1 in state memoLimit and runs on from there (up to its
// own MaxMatch limit, which lies past memoEnd since it started later). Its
// path is then the memo for the next attempt. Each path position is thus
// run over once, plus once more to refill the ring as attempts start
// further on; an attempt that does not join the path within len(ring)
// bytes pays for its own run. On a hostile body ("<a <a <a ..." against
// <a [^>]*>) attempts join the path after a few bytes and each byte costs a
// small constant number of DFA steps, whatever MaxMatch.

// beginAttempt prepares the memo for an attempt anchored at buf[j]: the
// path's positions before j+1 are forgotten and the ring is refilled from
// the path's last stored state up to memoEnd+1 (or the ring's size).
func (st *Stream) beginAttempt(buf []byte, start, j int) {
	delta := st.base - int64(start)
	lo := int64(j+1) + delta
	st.merged = false
	st.ownHi, st.ownSparseHi = lo-1, lo-1
	if st.memoOK && (len(st.ring) == 0 || lo > st.memoEnd || st.ringHi < st.ringLo || st.ringHi-delta < int64(start)) {
		st.memoOK = false
	}
	if st.memoOK {
		s := st.set
		m := int64(len(st.ring) - 1)
		hi := min(st.memoEnd+1, lo+m, int64(len(buf))+delta)
		t := st.ring[st.ringHi&m]
		for p := st.ringHi + 1; p <= hi; p++ {
			t = s.step(t, buf[p-1-delta])
			st.ring[p&m] = t
		}
		st.ringHi = max(st.ringHi, hi)
	}
	st.ringLo = lo
}

// step returns the DFA state after t reads b.
func (s *Set) step(t *state, b byte) *state {
	c := int(s.classes[b])
	if n := t.next[c].Load(); n != nil {
		return n
	}
	return s.dfa.build(t, c)
}

// runPlain runs the attempt anchored at buf[j] from state t over buf[k:],
// recording its best match in st.bestLen and st.bestRule, without the memo
// path (the drop reruns). It returns the last state and why it stopped.
func (st *Stream) runPlain(t *state, buf []byte, j, k int) (*state, int) {
	s := st.set
	limit := j + s.maxMatch // the last byte the attempt may consume
	for ; k < len(buf); k++ {
		t = s.step(t, buf[k])
		if t.match >= 0 {
			st.bestLen, st.bestRule = k-j, t.match
		}
		if len(t.pcs) == 0 {
			return t, runDead
		}
		if k == limit {
			return t, runLimit
		}
	}
	return t, runStarved
}

// runDFA is runPlain using and extending the memo path: delta converts a
// buf index to a body offset. It returns the last state, the index of the
// last byte consumed and why it stopped. (Its loop has step inline: this
// is the hottest loop, and step is over the inlining budget.)
func (st *Stream) runDFA(t *state, buf []byte, j, k int, delta int64) (*state, int, int) {
	s := st.set
	limit := j + s.maxMatch // the last byte the attempt may consume
	ring := st.ring
	m := int64(len(ring) - 1)
	winHi := st.ringLo + m // last position the ring can hold
	joinHi := int64(-1)    // last position where joining the path helps
	sparseJoinHi := int64(-1)
	if st.memoOK && !st.merged {
		joinHi = min(st.ringHi, st.memoEnd)
		sparseJoinHi = min(st.sparseHi, st.memoEnd)
	}
	strideMask := int64(s.sparseStride - 1)
	for ; k < len(buf); k++ {
		c := int(s.classes[buf[k]])
		n := t.next[c].Load()
		if n == nil {
			n = s.dfa.build(t, c)
		}
		t = n
		pos := int64(k+1) + delta
		if t.match >= 0 {
			st.bestLen, st.bestRule = k-j, t.match
		}
		if len(t.pcs) == 0 {
			return t, k, runDead
		}
		if k == limit {
			return t, k, runLimit
		}
		if pos&strideMask == 0 {
			slot := int(pos/int64(s.sparseStride)) % len(st.sparse)
			switch {
			case pos <= sparseJoinHi && st.sparse[slot] == t:
				return t, k, runMerged
			case !st.merged:
				st.ownSparse[slot] = t
				st.ownSparseHi = pos
			case pos == st.sparseHi+int64(s.sparseStride):
				st.sparse[slot] = t
				st.sparseHi = pos
			}
		}
		switch {
		case pos <= joinHi && ring[pos&m] == t:
			return t, k, runMerged
		case pos > winHi:
		case !st.merged:
			st.ownRing[pos&m] = t
			st.ownHi = pos
		case pos == st.ringHi+1:
			ring[pos&m] = t
			st.ringHi = pos
		}
	}
	return t, k - 1, runStarved
}

// advance feeds the running attempt anchored at buf[j]. It reports whether
// the attempt is resolved (st.bestLen then holds the winner, or -1).
func (st *Stream) advance(buf []byte, start, j int, final bool) bool {
	delta := st.base - int64(start)
	t, k, why := st.runDFA(st.runState, buf, j, j+st.runLen, delta)
	if why == runMerged {
		// From position p on, this attempt follows the memo path.
		p := int64(k+1) + delta
		st.merged = true
		m := int64(len(st.ring) - 1)
		for q := st.ringLo; q < p && q <= st.ownHi; q++ {
			st.ring[q&m] = st.ownRing[q&m]
		}
		if p > st.ringHi { // joined at a sparse position past the ring
			st.ringHi = st.ownHi
		}
		stride := int64(st.set.sparseStride)
		for q := (st.ringLo + stride - 1) / stride * stride; q < p; q += stride {
			slot := int(q/stride) % len(st.sparse)
			st.sparse[slot] = st.ownSparse[slot]
		}
		if st.memoMatch > p {
			st.bestLen, st.bestRule = int(st.memoMatch-1-delta)-j, st.memoRule
		}
		k = int(st.memoEnd - delta)
		if st.memoLimit == nil {
			st.resolved(buf, j, t, k, runDead, delta)
			return true
		}
		// The path's state after memoEnd was never stored: store it, so
		// that the sparse states stay contiguous.
		if q := st.memoEnd + 1; q%stride == 0 && q == st.sparseHi+stride {
			st.sparse[int(q/stride)%len(st.sparse)] = st.memoLimit
			st.sparseHi = q
		}
		t, k, why = st.runDFA(st.memoLimit, buf, j, k+1, delta)
	}
	if why == runStarved && !final {
		st.runState, st.runLen = t, len(buf)-j
		return false
	}
	st.resolved(buf, j, t, k, why, delta)
	// A match at the end of the body is no event of the path: the path's
	// own end decides it again for an attempt that joins it.
	if why == runStarved {
		if m := st.set.dfa.eofMatch(t); m >= 0 {
			st.bestLen, st.bestRule = len(buf)-j, m
		}
	}
	return true
}

// resolved ends an attempt: its path becomes the memo path unless the memo
// path was run further, and a drop is handled.
func (st *Stream) resolved(buf []byte, j int, t *state, k, why int, delta int64) {
	if end := int64(k) + delta; st.merged || !st.memoOK || end >= st.memoEnd {
		if !st.merged {
			st.ring, st.ownRing = st.ownRing, st.ring
			st.ringHi = st.ownHi
			st.sparse, st.ownSparse = st.ownSparse, st.sparse
			st.sparseHi = st.ownSparseHi
		}
		st.memoOK = true
		st.memoEnd = end
		st.memoLimit = nil
		if why != runDead {
			st.memoLimit = t
		}
		st.memoMatch, st.memoRule = -1, st.bestRule
		if st.bestLen >= 0 {
			st.memoMatch = int64(j+st.bestLen+1) + delta
		}
	}
	if why == runLimit {
		st.drop(buf, j, t)
	}
}

// drop handles an attempt still alive after MaxMatch bytes: the rules with
// live threads are dropped at this position, and the attempt is run again
// without them. This is the slow path; it needs no more input.
func (st *Stream) drop(buf []byte, j int, t *state) {
	s := st.set
	rest := st.scratch
	copy(rest, st.active)
	for why := runLimit; why == runLimit; {
		for _, pc := range t.pcs {
			if r := int(s.prog.insts[pc].rule); rest.Has(r) {
				rest.Remove(r)
				st.dropped++
			}
		}
		st.bestLen = -1
		if rest.Empty() {
			return
		}
		t, why = st.runPlain(s.dfa.start(rest, st.runPrev, false), buf, j, j)
	}
}

// replace writes the replacement of rule r for the match buf[j:e].
func (st *Stream) replace(buf []byte, start, j, e, r int) {
	s := st.set
	st.matched.Add(r)
	if s.rules[r].Once {
		st.active.Remove(r)
		st.activeChanged()
	}
	t := &s.tmpl[r]
	if t.constant != nil {
		st.write(t.constant)
		return
	}
	var idx []int
	if t.groups {
		idx = st.submatches(buf, start, j, e, r)
	}
	for _, p := range t.parts {
		switch p.kind {
		case partText:
			st.writeString(p.text)
		case partGroup:
			if p.group == 0 {
				st.write(buf[j:e])
			} else if idx != nil {
				// The first group of that name that took part, as Expand.
				g := p.group
				for k := 0; idx[2*g] < 0 && k < len(p.more); k++ {
					g = p.more[k]
				}
				if idx[2*g] >= 0 {
					st.write(idx2bytes(buf, idx, g))
				}
			}
		case partVar:
			st.write(st.lookup(p))
		}
	}
}

func idx2bytes(buf []byte, idx []int, g int) []byte { return buf[idx[2*g]:idx[2*g+1]] }

func (st *Stream) writeString(s string) {
	if st.err != nil || len(s) == 0 {
		return
	}
	_, st.err = io.WriteString(st.dst, s)
}

// submatches returns the group offsets (in buf) of rule r's match buf[j:e],
// or nil.
func (st *Stream) submatches(buf []byte, start, j, e, r int) []int {
	next := -1
	if e < len(buf) {
		next = int(buf[e])
	}
	cp := st.set.caps[r]
	idx := st.idx[:cp.ncap]
	if !cp.submatch(idx, buf[j:e], st.prevByte(buf, start, j), next) {
		return nil // cannot happen: the DFA matched this text
	}
	for i := range idx {
		if idx[i] >= 0 {
			idx[i] += j
		}
	}
	return idx
}

// lookup resolves a placeholder once per stream.
func (st *Stream) lookup(p part) []byte {
	i := p.group
	switch st.varKnown[i] {
	case 0:
		st.varKnown[i] = 2
		if st.vars != nil {
			if v, ok := st.vars(st.set.varNames[i]); ok {
				st.varKnown[i] = 1
				st.varVals[i] = append(st.varVals[i][:0], v...)
			}
		}
	}
	if st.varKnown[i] == 1 {
		return st.varVals[i]
	}
	return []byte(p.text)
}

// candidate returns the first index >= i where a match may start, or
// len(buf). Where the Set has Teddy and the CPU runs it, Teddy scans all
// but the last 36 bytes (teddy.go). Otherwise, when every match is long
// enough (Set.stride > 1), it first tests one position in stride against
// the anchor triples, which skips most of a body in few lookups. The rest
// of the body, or all of it, is read eight bytes at a time, looking up the
// seven byte pairs they hold in the pair table. Positions that hit are
// confirmed with the triple table before the DFA is started.
func (s *Set) candidate(buf []byte, i int) int {
	n := len(buf)
	p, t := &s.pair, &s.triple
	if s.teddy != nil && useTeddy {
		// Teddy tests a position's first triple; with anchors (o > 0),
		// the one at offset o must fit a match too (bit 0).
		o := s.stride - 1
		for {
			r, m := teddyScan(s.teddy, buf[i:])
			if i += r; m == 0 {
				break // the last 36 bytes or fewer: the scan below
			}
			for ; m != 0; m &= m - 1 {
				j := i + bits.TrailingZeros32(m)
				if s.canStart(buf, j) && (o == 0 || s.anchors[anchorHash(binary.LittleEndian.Uint32(buf[j+o:]))]&1 != 0) {
					return j
				}
			}
			i += 32
		}
	} else if k := s.stride; k > 1 {
		// One eight-byte load holds the triples of two anchors (stride 3:
		// offsets 0 and 3) or three (stride 2: 0, 2, 4). Their offset
		// masks, shifted by k per anchor, make one word whose bit b is a
		// possible start at a+b-k+1, in increasing order.
		q := &s.anchors
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
					if j := a + bits.TrailingZeros64(hit) - 2; s.canStart(buf, j) {
						return j
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
					if j := a + bits.TrailingZeros64(hit) - k + 1; s.canStart(buf, j) {
						return j
					}
				}
			}
			a = n - len(w)
		}
		i = a - k + 1 // the positions before are ruled out
	}
	q := &s.pair7
	if i+8 <= n {
		v := buf[i:]
		for ; len(v) >= 8; v = v[7:] {
			w := binary.LittleEndian.Uint64(v)
			if q[uint16(w)&0x7F7F]|q[uint16(w>>8)&0x7F7F]|q[uint16(w>>16)&0x7F7F]|q[uint16(w>>24)&0x7F7F]|
				q[uint16(w>>32)&0x7F7F]|q[uint16(w>>40)&0x7F7F]|q[uint16(w>>48)&0x7F7F] == 0 {
				continue
			}
			m := p[uint16(w)] | p[uint16(w>>8)]<<1 | p[uint16(w>>16)]<<2 | p[uint16(w>>24)]<<3 |
				p[uint16(w>>32)]<<4 | p[uint16(w>>40)]<<5 | p[uint16(w>>48)]<<6
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
		if p[uint16(buf[i])|uint16(buf[i+1])<<8] != 0 &&
			(i+2 >= n || t[tripleHash(uint32(buf[i])|uint32(buf[i+1])<<8|uint32(buf[i+2])<<16)] != 0) {
			return i
		}
	}
	if i < n && s.first[buf[i]] {
		return i
	}
	return n
}

// canStart reports whether the pair and triple tables let a match start at
// j; buf[j+3] must exist.
func (s *Set) canStart(buf []byte, j int) bool {
	x := binary.LittleEndian.Uint32(buf[j:])
	return s.pair[uint16(x)] != 0 && s.triple[tripleHash(x)] != 0
}

// tripleHash hashes the three low bytes of x (the higher byte is ignored).
func tripleHash(x uint32) uint16 {
	x &= 0xFFFFFF
	return uint16(x ^ x>>11)
}
