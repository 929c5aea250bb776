package engine

import (
	"regexp/syntax"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Context flags of a DFA state: what the byte before it was. Zero-width
// assertions are decided when the next byte (or the end of input) is known,
// so a state only needs to remember this much of its past.
const (
	flagStart uint8 = 1 << iota // no byte before: start of the body
	flagNL                      // previous byte was '\n'
	flagWord                    // previous byte was an ASCII word byte
)

// startFlags is the context of a start state by prevClass.
var startFlags = [4]uint8{flagStart, flagNL, flagWord, 0}

// prevClass maps the previous byte (-1: none) to an index in startFlags:
// a table lookup, since every attempt and every jump of the guard's scans
// asks it.
func prevClass(prev int) int {
	if prev < 0 {
		return 0
	}
	return int(prevClasses[byte(prev)])
}

// prevClasses is prevClass for a byte.
var prevClasses = func() (t [256]uint8) {
	for b := range t {
		switch {
		case b == '\n':
			t[b] = 1
		case isWordByte(byte(b)):
			t[b] = 2
		default:
			t[b] = 3
		}
	}
	return t
}()

func isWordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}

func flagsAfter(b byte) uint8 {
	switch {
	case b == '\n':
		return flagNL
	case isWordByte(b):
		return flagWord
	}
	return 0
}

// emptyContext is the set of zero-width assertions true between a byte
// described by flags and the next byte b (-1: end of input).
func emptyContext(flags uint8, b int) syntax.EmptyOp {
	var op syntax.EmptyOp
	if flags&flagStart != 0 {
		op |= syntax.EmptyBeginText | syntax.EmptyBeginLine
	}
	if flags&flagNL != 0 {
		op |= syntax.EmptyBeginLine
	}
	if b < 0 {
		op |= syntax.EmptyEndText | syntax.EmptyEndLine
	} else if b == '\n' {
		op |= syntax.EmptyEndLine
	}
	if (flags&flagWord != 0) != (b >= 0 && isWordByte(byte(b))) {
		op |= syntax.EmptyWordBoundary
	} else {
		op |= syntax.EmptyNoWordBoundary
	}
	return op
}

// state is a DFA state: the NFA threads waiting for the next byte, in
// priority order (sorted by pc under Longest, where order is irrelevant),
// plus the context flags. match is the rule whose match ended just before
// the byte that led here (-1: none). States are immutable except for their
// transitions, which are filled in lazily and read without locks.
type state struct {
	next []atomic.Pointer[state]
	pcs  []uint32
	// outs, in a backward scan's state, holds where its byte instructions
	// lead (guard.useful): sorted, or as a bit set when that is smaller.
	outs []uint32
	eof  atomic.Int32 // rule matched at end of input; -2: not computed yet

	// What a scan reads at every byte comes last, next to the transitions
	// newState allocates right after the struct (read with one load from
	// the state's address: to), so that a step to a state not read lately
	// touches one cache line, not two.
	match int32
	flags uint8
	empty bool // no thread: len(pcs) == 0
	// dense: outs is a bit set over the instructions, not a sorted list.
	dense bool
	// idle: a guard's forward scan has no thread alive in this state, one
	// of its start states after a byte (guardAutomata.fStart[1:]).
	idle bool
	// event: match >= 0 or idle, the forward scan's one test per byte.
	event bool
}

// alive reports whether an attempt in state s is still of use: threads are
// left, or a match ended just before the byte that led to s.
func (s *state) alive() bool { return !s.empty || s.match >= 0 }

// The lazy DFA. A state is the ordered list of NFA threads waiting for the
// next byte plus what the previous byte was (start, '\n', word byte,
// other). Zero-width assertions are decided when the next byte, or the end
// of the body, is known, so a match is seen one byte late and $, \z and \b
// are right at chunk boundaries and at the end. A transition records the
// rule whose match ended before the byte: the lowest numbered rule under
// Longest; under First, the threads are in priority order (declaration
// order, then leftmost-first inside a regexp) and a match cuts the threads
// below it, as in a Pike VM. States are built on demand and cached in a
// table shared by every stream of a Set (transitions are read with atomic
// loads, built under a mutex). The cache is bounded by Options.CacheSize;
// when it is full it is emptied and refilled on demand (RE2's policy),
// which keeps memory bounded and output unchanged: in the worst case each
// byte pays for building a state, like one Pike VM step.
//
// dfa is the lazily built, size-bounded DFA shared by every stream of a Set.
type dfa struct {
	prog     *nfa
	first    bool // leftmost-first thread priority (else leftmost-longest)
	classes  *[256]uint8
	classRep []byte // a byte of each class

	// The guard's automata (guard.go) set these: inject lists the pcs every
	// transition adds (the rules' entry points for the forward scan that
	// finds where matches end; the match instructions for the backward
	// scan that finds where they start), and rev, for the backward scan,
	// the predecessors it follows.
	inject []uint32
	rev    *revGraph

	mu      sync.Mutex
	states  map[string]*state
	pinned  []*state // start states kept across cache resets
	size    int
	limit   int
	resets  atomic.Int64
	visited []uint32 // sparse set: dense
	index   []uint32 // sparse set: sparse
	stack   []uint32
	out     []uint32
	key     []byte
}

func newDFA(prog *nfa, first bool, classes *[256]uint8, rep []byte, limit int) *dfa {
	return &dfa{
		prog: prog, first: first, classes: classes, classRep: rep, limit: limit,
		states: make(map[string]*state),
		index:  make([]uint32, len(prog.insts)),
	}
}

// stateSize is what the cache charges for a state of npcs threads: its
// threads, its transitions, the struct, and stateOverhead.
func (d *dfa) stateSize(npcs int) int {
	return npcs*4 + nextCap(len(d.classRep)+1)*int(unsafe.Sizeof(atomic.Pointer[state]{})) + int(unsafe.Sizeof(state{})) + stateOverhead
}

// nextCap is the room newState gives n transitions.
func nextCap(n int) int {
	for _, c := range nextCaps {
		if n <= c {
			return c
		}
	}
	return n
}

// nextCaps are the transition counts newState allocates with the struct;
// each is at most 1.5 times the one before, so that little is wasted.
var nextCaps = [...]int{4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 257}

// newState returns a state with n transitions (at most 257: 256 byte
// classes and an extra slot), allocated in one block right after it.
func newState(n int) *state {
	type with[A any] struct {
		s state
		a A
	}
	var s *state
	switch c := nextCap(n); c {
	case 4:
		x := new(with[[4]atomic.Pointer[state]])
		s, x.s.next = &x.s, x.a[:n:n]
	case 6:
		x := new(with[[6]atomic.Pointer[state]])
		s, x.s.next = &x.s, x.a[:n:n]
	case 8:
		x := new(with[[8]atomic.Pointer[state]])
		s, x.s.next = &x.s, x.a[:n:n]
	case 12:
		x := new(with[[12]atomic.Pointer[state]])
		s, x.s.next = &x.s, x.a[:n:n]
	case 16:
		x := new(with[[16]atomic.Pointer[state]])
		s, x.s.next = &x.s, x.a[:n:n]
	case 24:
		x := new(with[[24]atomic.Pointer[state]])
		s, x.s.next = &x.s, x.a[:n:n]
	case 32:
		x := new(with[[32]atomic.Pointer[state]])
		s, x.s.next = &x.s, x.a[:n:n]
	case 48:
		x := new(with[[48]atomic.Pointer[state]])
		s, x.s.next = &x.s, x.a[:n:n]
	case 64:
		x := new(with[[64]atomic.Pointer[state]])
		s, x.s.next = &x.s, x.a[:n:n]
	case 96:
		x := new(with[[96]atomic.Pointer[state]])
		s, x.s.next = &x.s, x.a[:n:n]
	case 128:
		x := new(with[[128]atomic.Pointer[state]])
		s, x.s.next = &x.s, x.a[:n:n]
	case 192:
		x := new(with[[192]atomic.Pointer[state]])
		s, x.s.next = &x.s, x.a[:n:n]
	case 257:
		x := new(with[[257]atomic.Pointer[state]])
		s, x.s.next = &x.s, x.a[:n:n]
	default:
		panic("engine: more than 257 transitions")
	}
	return s
}

// to returns the transition of s on class c (nil: not built yet), as
// s.next[c].Load() but with one load on the path from s, not two: in a
// DFA loop each byte's load depends on the last one, and this halves the
// chain. c must be below len(s.next); newState put the transitions at
// nextOffset from s.
func (s *state) to(c int) *state {
	return (*atomic.Pointer[state])(unsafe.Add(unsafe.Pointer(s), nextOffset+uintptr(c)*unsafe.Sizeof(atomic.Pointer[state]{}))).Load()
}

// nextOffset is where newState's transitions begin, from the state.
const nextOffset = unsafe.Sizeof(state{})

// stateOverhead estimates a cached state's share of the cache map: its
// entry and its key's string header and bytes.
const stateOverhead = 48

// intern returns the state for (flags, match, pcs), creating it if needed.
// d.mu must be held.
func (d *dfa) intern(flags uint8, match int32, pcs []uint32) *state {
	d.key = appendKey(d.key[:0], flags, match, pcs)
	if s, ok := d.states[string(d.key)]; ok {
		return s
	}
	sz := d.stateSize(len(pcs))
	if d.size+sz > d.limit {
		d.reset()
	}
	s := newState(len(d.classRep) + 1)
	s.pcs, s.flags, s.match, s.empty = slices.Clone(pcs), flags, match, len(pcs) == 0
	s.event = match >= 0
	if d.rev != nil {
		s.outs, s.dense = d.rev.outsOf(d.prog, pcs)
		sz += 4 * len(s.outs)
	}
	s.eof.Store(-2)
	d.states[string(d.key)] = s
	d.size += sz
	return s
}

// reset empties the cache when it is full (RE2's policy). Streams holding a
// state keep a valid, immutable object; its transitions are cleared so that
// they are rebuilt in the new cache, and the old states become garbage.
func (d *dfa) reset() {
	for _, s := range d.states {
		for i := range s.next {
			s.next[i].Store(nil)
		}
	}
	clear(d.states)
	d.size = 0
	d.resets.Add(1)
	for _, s := range d.pinned {
		d.states[string(appendKey(nil, s.flags, s.match, s.pcs))] = s
		d.size += d.stateSize(len(s.pcs))
	}
}

// appendKey appends the cache key of the state (flags, match, pcs) to dst.
func appendKey(dst []byte, flags uint8, match int32, pcs []uint32) []byte {
	dst = append(dst, flags, byte(match), byte(match>>8), byte(match>>16), byte(match>>24))
	for _, pc := range pcs {
		dst = append(dst, byte(pc), byte(pc>>8), byte(pc>>16), byte(pc>>24))
	}
	return dst
}

// step runs the NFA threads of a state (flags, pcs) over byte b (-1: end of
// input): it follows the zero-width instructions the context allows, in
// priority order, records the best rule that matches before b, and collects
// the threads that consume b into d.out. Under leftmost-first semantics a
// match cuts every lower-priority thread. d.mu must be held.
func (d *dfa) step(flags uint8, pcs []uint32, b int) int32 {
	ctx := emptyContext(flags, b)
	insts := d.prog.insts
	d.visited = d.visited[:0]
	d.out = d.out[:0]
	match := int32(-1)
	for _, pc := range pcs {
		d.stack = append(d.stack[:0], pc)
		for len(d.stack) > 0 {
			pc := d.stack[len(d.stack)-1]
			d.stack = d.stack[:len(d.stack)-1]
			if i := d.index[pc]; int(i) < len(d.visited) && d.visited[i] == pc {
				continue
			}
			d.index[pc] = uint32(len(d.visited))
			d.visited = append(d.visited, pc)
			in := &insts[pc]
			switch in.op {
			case opByte:
				if b >= 0 && in.lo <= byte(b) && byte(b) <= in.hi {
					d.out = append(d.out, in.out)
				}
			case opSplit:
				d.stack = append(d.stack, in.out1, in.out)
			case opNop:
				d.stack = append(d.stack, in.out)
			case opEmpty:
				if in.empty&^ctx == 0 {
					d.stack = append(d.stack, in.out)
				}
			case opMatch:
				if d.first {
					if match < 0 {
						match = in.rule
					}
					// Lower-priority threads lose to this match.
					return match
				}
				if match < 0 || in.rule < match {
					match = in.rule
				}
			}
		}
	}
	return match
}

// stepAny is step, or stepRev for a backward automaton.
func (d *dfa) stepAny(flags uint8, pcs []uint32, b int) int32 {
	if d.rev != nil {
		return d.stepRev(flags, pcs, b)
	}
	return d.step(flags, pcs, b)
}

// next returns the transition of s on byte class c, building it on first
// use.
func (d *dfa) next(s *state, c int) *state {
	if t := s.next[c].Load(); t != nil {
		return t
	}
	return d.build(s, c)
}

// build computes the transition of s on byte class c.
func (d *dfa) build(s *state, c int) *state {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t := s.next[c].Load(); t != nil {
		return t // another stream built it meanwhile
	}
	b := d.classRep[c]
	m := d.stepAny(s.flags, s.pcs, int(b))
	d.out = append(d.out, d.inject...)
	out := d.dedup(d.out)
	t := d.intern(flagsAfter(b), m, out)
	s.next[c].Store(t)
	return t
}

// eofMatch returns the rule that matches at the end of input from s, or -1.
func (d *dfa) eofMatch(s *state) int32 {
	if m := s.eof.Load(); m != -2 {
		return m
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.stepAny(s.flags, s.pcs, -1)
	s.eof.Store(m)
	return m
}

// dedup removes repeated pcs keeping the first (highest priority); under
// leftmost-longest the order carries no meaning, so the set is sorted to
// share more states.
func (d *dfa) dedup(pcs []uint32) []uint32 {
	if !d.first {
		slices.Sort(pcs)
		return slices.Compact(pcs)
	}
	n := 0
	for _, pc := range pcs {
		if !slices.Contains(pcs[:n], pc) {
			pcs[n] = pc
			n++
		}
	}
	return pcs[:n]
}

// start returns the start state for the rules in active after a byte of
// class prev (see prevClass).
func (d *dfa) start(active Mask, prev int, pin bool) *state {
	d.mu.Lock()
	defer d.mu.Unlock()
	pcs := d.out[:0] // scratch; intern copies it
	for r, pc := range d.prog.start {
		if active.Has(r) {
			pcs = append(pcs, pc)
		}
	}
	pcs = d.dedup(pcs)
	d.out = pcs
	s := d.intern(startFlags[prev], -1, pcs)
	if pin {
		d.pinned = append(d.pinned, s)
	}
	return s
}
