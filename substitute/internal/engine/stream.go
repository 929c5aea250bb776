package engine

import "io"

// Vars resolves a {name} placeholder of a replacement. A nil Vars, or ok
// false, leaves "{name}" in the output as written. Values are inserted
// verbatim: a $ inside them is never expanded.
type Vars func(name string) (value string, ok bool)

// How a stream matches. From each candidate the prefilter finds, the DFA
// runs anchored, for every active rule at once, until it dies, until
// MaxMatch+1 bytes have been read, or until the input runs out, in which
// case the attempt is kept (its state and at most MaxMatch bytes) and
// resumed by the next Write. The attempt's best match wins: the leftmost,
// since candidates are tried in order, then as Priority says. The bytes
// before it are written out in one Write, the replacement follows, and the
// scan resumes after the match; a failed attempt resumes it one byte after
// its start, and the path memo (pathmemo.go) keeps the next attempts from
// reading the same bytes again and again. A candidate whose first three
// bytes belong to a literal rule that alone can match there is decided by
// comparing the literal (Stream.literal). A rule still able to grow after
// MaxMatch bytes is dropped at that position and the attempt is run again
// without it (Stream.drop). The start states for a reduced set of rules
// (Once) are interned in the DFA cache like any state.

// Stream substitutes one body. Write the body in chunks of any size; the
// output is the same whatever the chunk boundaries. A Stream is not safe for
// concurrent use; reuse it with Reset.
type Stream struct {
	set  *Set
	dst  io.Writer
	vars Vars
	err  error

	active  Mask // rules taking part
	all     bool // active holds every rule (use the Set's start states)
	none    bool // no rule left: pass everything through
	running bool // a match attempt is in progress (run)
	waiting bool // the guard holds candidates until more input comes
	// dropPrev: see dropFrom (here, where it takes no word of its own).
	dropPrev uint8
	starts   [4]*state
	matched  Mask
	scratch  Mask
	// dropStart is the start state of the rules left by the last drop from
	// state dropFrom after a byte of prevClass dropPrev, with the active
	// rules unchanged since: on a hostile body the drops repeat alike, and
	// this saves a locked cache lookup each.
	dropFrom, dropStart *state
	dropped             int
	attempts            attemptCounter // match attempts started (enginestats builds only)

	// hold[0] is the byte before the pending bytes hold[1:] (valid when
	// prev >= 0). Pending bytes are those of a match attempt still running;
	// there are at most MaxMatch of them. hold grows as an attempt needs it,
	// up to holdMax: a stream that holds little costs little, whatever
	// MaxMatch.
	hold    []byte
	holdMax int // 1 + MaxMatch + holdSlack
	prev    int // byte before the unprocessed input, -1 at the start

	// The match attempt in progress, anchored at the first pending byte.
	run  attempt
	memo pathMemo // the path of the attempt run furthest

	// guard keeps a hostile body linear (guard.go); work counts the bytes
	// attempts read, to turn it on.
	guard *guard
	work  int64

	idx []int // submatch offsets
	// base is the offset in the body of the first byte process is given.
	base int64

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
		set:      s,
		active:   NewMask(len(s.rules)),
		matched:  NewMask(len(s.rules)),
		scratch:  NewMask(len(s.rules)),
		holdMax:  1 + s.maxMatch + holdSlack,
		varVals:  make([][]byte, len(s.varNames)),
		varKnown: make([]uint8, len(s.varNames)),
		idx:      make([]int, s.maxCap),
		memo:     newPathMemo(s.memoShape),
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
	st.dropFrom, st.dropStart = nil, nil
	clear(st.matched)
	st.dropped = 0
	st.attempts.reset()
	if cap(st.hold) > holdRetain || st.hold == nil {
		st.hold = make([]byte, 1, min(holdInitial, st.holdMax))
	}
	st.hold = st.hold[:1]
	st.prev = -1
	st.base = 0
	st.memo.reset()
	st.running, st.waiting = false, false
	if st.guard != nil {
		st.guard.on = false
	}
	st.holdMax = 1 + st.set.maxMatch + holdSlack
	st.work = 0
	for i := range st.varVals {
		st.varVals[i] = st.varVals[i][:0]
	}
	clear(st.varKnown)
}

func (st *Stream) activeChanged() {
	st.all = st.active.Equal(st.set.all)
	st.none = st.active.Empty()
	st.starts = [4]*state{}
	st.dropFrom, st.dropStart = nil, nil
}

// Matched returns the rules that matched so far. The mask belongs to the
// stream and is valid until the next Reset.
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
		if !st.running && !st.waiting {
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
	if st.err == nil && (st.running || st.waiting) {
		st.keep(st.hold, st.process(st.hold, 1, true))
	}
	st.running, st.waiting = false, false
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
	if st.guard != nil && st.guard.on || s.guardMode == guardAlways {
		return st.processGuarded(buf, start, start, final)
	}
	emit, i := start, start
	for st.err == nil {
		j := start
		if !st.running {
			if st.none {
				break
			}
			j = s.pre.next(buf, i)
			if j >= len(buf) {
				break
			}
			if st.work > guardRatio*(int64(j)+st.base-int64(start))+guardSlack && s.guardMode == guardAuto {
				// Attempts read far more than the body: the guard
				// takes over from this candidate.
				st.write(buf[emit:j])
				return st.processGuarded(buf, start, j, final)
			}
			st.work += guardAttemptCost
			st.attempts.add()
			if !st.literal(buf, j) {
				prev := prevClass(st.prevByte(buf, start, j))
				st.running = true
				st.run.state, st.run.len, st.run.prev, st.run.bestLen = st.startState(prev), 0, prev, -1
				st.memo.begin(s, buf, start, j, st.base-int64(start))
			}
		}
		if st.running {
			// Feed the attempt (inline: a call per attempt measured
			// several percent on hostile bodies).
			delta := st.base - int64(start)
			t, k, why := st.memo.run(s, &st.run, buf, j, delta)
			st.work += int64(k - j - st.run.len + 1)
			if why == runStarved && !final {
				// Out of input: held until the next Write.
				st.run.state, st.run.len = t, len(buf)-j
				st.write(buf[emit:j])
				return j
			}
			st.memo.resolve(&st.run, j, k, t, why, delta)
			// A match at the end of the body is no event of the path: the
			// path's own end decides it again for an attempt that joins it.
			st.settle(buf, j, t, why)
		}
		st.running = false
		if st.run.bestLen < 0 {
			i = j + 1
			continue
		}
		emit = st.emit(buf, start, emit, j)
		i = emit
	}
	st.write(buf[emit:])
	return len(buf)
}

// processGuarded is process with the guard on (guard.go), from buf[from]
// (bytes before it are written or matched already): a candidate gets an
// attempt only if the guard's scans say a match can begin there, and one
// whose bytes the scans have not covered yet is held until more input
// comes.
func (st *Stream) processGuarded(buf []byte, start, from int, final bool) int {
	s := st.set
	a := s.guardAutomata()
	if st.guard == nil {
		st.guard = new(guard)
	}
	g := st.guard
	// Input is taken in larger rounds: the scans cover a candidate only
	// reach bytes past it, so a round of holdSlack would rescan the held
	// bytes many times.
	st.holdMax = 1 + s.maxMatch + max(holdSlack, min(s.maxMatch, guardWindow))
	delta := st.base - int64(start)
	emit, i := from, from
	st.waiting = false
	for st.err == nil {
		j := start
		if !st.running {
			if st.none {
				break
			}
			if i >= len(buf) {
				break
			}
			// The scans' marks, not the prefilter, give the candidates.
			pos := int64(i) + delta
			if !g.on || pos > g.uPos {
				g.restart(a, pos, prevClass(st.prevByte(buf, start, i)))
			}
			if !g.covered(a.reach, pos) {
				g.cover(s, buf, i, st.prev, final, delta)
			}
			m := g.nextMark(pos)
			if g.done {
				if m > g.top {
					break // no match begins in the rest of the body
				}
			} else if lim := g.top - int64(a.reach) + 1; m > max(pos, lim) {
				// Positions below lim are decided (no match begins there
				// unless marked); from lim on, a match ending after top
				// may still begin: wait for more input.
				if lim > pos {
					i = int(lim - delta)
					continue
				}
				st.waiting = true
				st.write(buf[emit:i])
				return i
			}
			j = int(m - delta)
			// Decided (the scans cover the candidate's reach): attempt it
			// if a match can begin there. Undecided: wait for more input,
			// rather than run an attempt the scans cannot cut short.
			if !g.covered(a.reach, m) && !g.cover(s, buf, j, st.prev, final, delta) {
				st.waiting = true
				st.write(buf[emit:j])
				return j
			}
			e1, ok := g.worth(s, m)
			if !ok {
				i = j + 1
				continue
			}
			st.attempts.add()
			if e, ok := g.only(s, m); ok && st.all {
				st.run.bestLen, st.run.bestRule = int(e-m), 0
			} else if e, r, ok := g.decided(s, m, e1); ok && st.all {
				st.run.bestLen, st.run.bestRule = int(e-m), r
			} else if !st.literal(buf, j) {
				prev := prevClass(st.prevByte(buf, start, j))
				st.running = true
				st.run.state, st.run.len, st.run.prev, st.run.bestLen = st.startState(prev), 0, prev, -1
			}
		}
		if st.running {
			// No path memo: attempts start only where a match begins.
			// The last end the scans know in reach is where the attempt's
			// last match event can be; past it, only a rule given up at
			// MaxMatch could change the outcome, and only the best
			// match's own rule can (see guard.settled).
			soft := -1
			if pos := int64(j) + delta; g.done || g.top >= pos+int64(a.reach) {
				soft = j // no end in reach: nothing can match
				if e := g.prevEnd(pos+int64(a.reach), pos+1); e >= 0 {
					// A match from j ends at or before the first
					// position above j that no known match crosses.
					soft = int(min(e, g.cut(pos+1, e)) - delta)
				}
			} // else an attempt begun before the guard, resumed
			t, k, why := g.run(s, &st.run, st.run.state, buf, j, j+st.run.len, soft, delta)
			if why == runSettled {
				if g.settled(s, &st.run, t) {
					why = runDead
				} else {
					t, why = s.runPlain(&st.run, t, buf, j, k+1)
				}
			}
			if why == runStarved && !final {
				st.run.state, st.run.len = t, len(buf)-j
				st.write(buf[emit:j])
				return j
			}
			if why == runLimit || why == runStarved {
				// Dead or settled attempts have their outcome.
				st.settle(buf, j, t, why)
			}
		}
		st.running = false
		if st.run.bestLen < 0 {
			i = j + 1
			continue
		}
		emit = st.emit(buf, start, emit, j)
		i = emit
	}
	st.write(buf[emit:])
	return len(buf)
}

// settle ends the attempt at buf[j], stopped in state t for reason why:
// past MaxMatch its live rules are dropped; at the end of the body, a match
// ending there counts.
func (st *Stream) settle(buf []byte, j int, t *state, why int) {
	switch why {
	case runLimit:
		st.drop(buf, j, t)
	case runStarved:
		if m := st.set.dfa.eofMatch(t); m >= 0 {
			st.run.bestLen, st.run.bestRule = len(buf)-j, m
		}
	}
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
	r := s.pre.owner(buf[j : j+3])
	if r < 0 || !st.active.Has(int(r)) {
		return false
	}
	lit := s.rules[r].Pattern
	if string(buf[j:j+3]) != lit[:3] || j+len(lit) > len(buf) {
		return false
	}
	st.run.bestLen, st.run.bestRule = -1, r
	if string(buf[j+3:j+len(lit)]) == lit[3:] {
		st.run.bestLen = len(lit)
	}
	return true
}

func (st *Stream) prevByte(buf []byte, start, j int) int {
	if j > start {
		return int(buf[j-1])
	}
	return st.prev
}

// startState returns the start state of the active rules after a byte of
// class pc. Small enough to inline (every attempt asks it): the reduced
// set's states are startReduced's.
func (st *Stream) startState(pc int) *state {
	if st.all {
		return st.set.full[pc]
	}
	return st.startReduced(pc)
}

func (st *Stream) startReduced(pc int) *state {
	if st.starts[pc] == nil {
		st.starts[pc] = st.set.dfa.start(st.active, pc, false)
	}
	return st.starts[pc]
}

// drop handles an attempt still alive after MaxMatch bytes: the rules with
// live threads are dropped at this position, and the attempt is run again
// without them. This is the slow path; it needs no more input.
func (st *Stream) drop(buf []byte, j int, t *state) {
	s := st.set
	rest := st.scratch
	copy(rest, st.active)
	for first := true; ; first = false {
		from := t
		for _, pc := range t.pcs {
			if r := int(s.prog.insts[pc].rule); rest.Has(r) {
				rest.Remove(r)
				st.dropped++
			}
		}
		st.run.bestLen = -1
		if rest.Empty() {
			return
		}
		// The first round's rules depend only on the active rules and from.
		start := st.dropStart
		if !first || from != st.dropFrom || int(st.dropPrev) != st.run.prev {
			start = s.dfa.start(rest, st.run.prev, false)
			if first {
				st.dropFrom, st.dropPrev, st.dropStart = from, uint8(st.run.prev), start
			}
		}
		var why int
		if t, why = s.runPlain(&st.run, start, buf, j, j); why != runLimit {
			return
		}
	}
}
