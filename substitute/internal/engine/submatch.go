package engine

import (
	"bytes"
	"regexp/syntax"
	"sync"
	"unicode/utf8"
)

// capProg computes capture groups for the rules whose replacement uses
// them. The DFA only finds where a match starts and ends; groups are then
// those of the leftmost-first parse of that exact text, with the bytes
// around the match as context for assertions. Short texts are parsed by a
// backtracker that visits each (instruction, position) at most once; longer
// ones by a Pike VM (the two methods of Go's regexp), both over the
// rune-level program. Machines are pooled so a steady stream allocates
// nothing.
type capProg struct {
	prog *syntax.Prog
	ncap int
	runs []litRun  // by pc: the literal run starting there, if any
	pool sync.Pool // *capMachine
}

// litRun is a chain of two or more single-byte rune instructions that
// nothing enters but through its first: the backtracker compares it with
// the text at once (a URL prefix is most of a typical match) and jumps to
// out. Its inner (pc, pos) pairs need no visited bits, since they are
// reached only through the first.
type litRun struct {
	lit []byte
	out uint32
}

func newCapProg(re *syntax.Regexp) (*capProg, error) {
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, err
	}
	return &capProg{prog: prog, ncap: 2 * (re.MaxCap() + 1), runs: litRuns(prog)}, nil
}

// litRuns finds the literal runs of prog.
func litRuns(prog *syntax.Prog) []litRun {
	in := make([]int, len(prog.Inst)) // how many edges enter each pc
	in[prog.Start]++
	for _, i := range prog.Inst {
		switch i.Op {
		case syntax.InstMatch, syntax.InstFail:
			continue
		case syntax.InstAlt, syntax.InstAltMatch:
			in[i.Arg]++
		}
		in[i.Out]++
	}
	// InstRune1 never folds case (the compiler emits InstRune otherwise).
	byte1 := func(pc uint32) bool {
		i := &prog.Inst[pc]
		return i.Op == syntax.InstRune1 && i.Rune[0] < utf8.RuneSelf
	}
	// inner: entered only from a single-byte instruction, so a run that
	// reaches it goes on through it.
	inner := make([]bool, len(prog.Inst))
	for pc := range prog.Inst {
		if byte1(uint32(pc)) && in[prog.Inst[pc].Out] == 1 {
			inner[prog.Inst[pc].Out] = true
		}
	}
	runs := make([]litRun, len(prog.Inst))
	for pc := range prog.Inst {
		if !byte1(uint32(pc)) || inner[pc] {
			continue
		}
		lit := []byte{byte(prog.Inst[pc].Rune[0])}
		end := prog.Inst[pc].Out
		for byte1(end) && inner[end] {
			lit = append(lit, byte(prog.Inst[end].Rune[0]))
			end = prog.Inst[end].Out
		}
		if len(lit) >= 2 {
			runs[pc] = litRun{lit: lit, out: end}
		}
	}
	return runs
}

type capQueue struct {
	sparse []uint32
	dense  []uint32 // pcs, in priority order
	caps   []int    // ncap slots per dense entry
}

func (q *capQueue) contains(pc uint32) bool {
	i := q.sparse[pc]
	return int(i) < len(q.dense) && q.dense[i] == pc
}

type capMachine struct {
	p      *capProg
	q0, q1 capQueue
	cap    []int
	result []int

	// The backtracker's stack and visited set.
	jobs    []capJob
	visited []uint32
}

// capJob is a backtracker's pending step: at an Alt, try its other branch
// (alt); at a Capture, restore the slot's old value (pos).
type capJob struct {
	pc  uint32
	alt bool
	pos int
}

// maxBacktrackBits bounds the backtracker's visited set (instructions x
// positions), as Go's regexp does; longer texts go to the Pike VM.
const maxBacktrackBits = 256 << 10

func (p *capProg) machine() *capMachine {
	if m, ok := p.pool.Get().(*capMachine); ok {
		return m
	}
	n := len(p.prog.Inst)
	newQ := func() capQueue {
		return capQueue{sparse: make([]uint32, n), dense: make([]uint32, 0, n), caps: make([]int, n*p.ncap)}
	}
	return &capMachine{p: p, q0: newQ(), q1: newQ(), cap: make([]int, p.ncap), result: make([]int, p.ncap)}
}

// contextRune maps a byte next to the text (-1: none) to a rune with the
// same meaning for assertions.
func contextRune(b int) rune {
	if b < 0 || b < utf8.RuneSelf {
		return rune(b)
	}
	return utf8.RuneError
}

// submatch fills dst (len ncap) with the group offsets of the
// leftmost-first parse of text as a whole, given the bytes before and after
// it (-1: none). It reports false if text does not match as a whole.
func (p *capProg) submatch(dst []int, text []byte, prev, next int) bool {
	m := p.machine()
	defer p.pool.Put(m)
	for i := range m.cap {
		m.cap[i] = -1
	}
	if len(p.prog.Inst)*(len(text)+1) <= maxBacktrackBits {
		return m.backtrack(dst, text, prev, next)
	}
	return m.pike(dst, text, prev, next)
}

// pike is submatch by a Pike VM: all threads advance together, one rune at
// a time, so the work is linear in the text whatever its length.
func (m *capMachine) pike(dst []int, text []byte, prev, next int) bool {
	p := m.p
	run, nxt := &m.q0, &m.q1
	run.dense, nxt.dense = run.dense[:0], nxt.dense[:0]
	matched := false
	r1 := contextRune(prev)
	r, w := rune(-1), 0
	if len(text) > 0 {
		r, w = utf8.DecodeRune(text)
	} else {
		r = contextRune(next)
	}
	m.add(run, uint32(p.prog.Start), 0, m.cap, syntax.EmptyOpContext(r1, r))
	for pos := 0; len(run.dense) > 0; {
		atEnd := pos == len(text)
		// The rune after this one, for the context at pos+w.
		var r2 rune
		var w2 int
		if !atEnd {
			if pos+w < len(text) {
				r2, w2 = utf8.DecodeRune(text[pos+w:])
			} else {
				r2 = contextRune(next)
			}
		}
		ctx := syntax.EmptyOpContext(r, r2)
		for i, pc := range run.dense {
			in := &p.prog.Inst[pc]
			caps := run.caps[i*p.ncap : (i+1)*p.ncap]
			ok := false
			switch in.Op {
			case syntax.InstMatch:
				if atEnd {
					copy(m.result, caps)
					matched = true
				}
			case syntax.InstRune, syntax.InstRune1:
				ok = !atEnd && in.MatchRune(r)
			case syntax.InstRuneAny:
				ok = !atEnd
			case syntax.InstRuneAnyNotNL:
				ok = !atEnd && r != '\n'
			}
			if matched {
				break // lower-priority threads lose
			}
			if ok {
				m.add(nxt, in.Out, pos+w, caps, ctx)
			}
		}
		if atEnd {
			break
		}
		run, nxt = nxt, run
		nxt.dense = nxt.dense[:0]
		pos += w
		r, w = r2, w2
	}
	if matched {
		copy(dst, m.result)
		dst[0], dst[1] = 0, len(text)
	}
	return matched
}

// add follows empty instructions from pc at pos, recording capture
// positions, and queues the threads that consume a rune or match.
func (m *capMachine) add(q *capQueue, pc uint32, pos int, cap []int, ctx syntax.EmptyOp) {
	if q.contains(pc) {
		return
	}
	q.sparse[pc] = uint32(len(q.dense))
	q.dense = append(q.dense, pc)
	in := &m.p.prog.Inst[pc]
	switch in.Op {
	case syntax.InstAlt, syntax.InstAltMatch:
		m.add(q, in.Out, pos, cap, ctx)
		m.add(q, in.Arg, pos, cap, ctx)
	case syntax.InstEmptyWidth:
		if syntax.EmptyOp(in.Arg)&^ctx == 0 {
			m.add(q, in.Out, pos, cap, ctx)
		}
	case syntax.InstNop:
		m.add(q, in.Out, pos, cap, ctx)
	case syntax.InstCapture:
		if int(in.Arg) < len(cap) {
			old := cap[in.Arg]
			cap[in.Arg] = pos
			m.add(q, in.Out, pos, cap, ctx)
			cap[in.Arg] = old
		} else {
			m.add(q, in.Out, pos, cap, ctx)
		}
	case syntax.InstMatch, syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
		i := len(q.dense) - 1
		copy(q.caps[i*m.p.ncap:(i+1)*m.p.ncap], cap)
	}
}

// backtrack is submatch by depth-first search in priority order: the first
// parse that ends exactly at the end of text is the leftmost-first one. A
// (pc, pos) visited before failed then, so it is not tried again.
func (m *capMachine) backtrack(dst []int, text []byte, prev, next int) bool {
	prog := m.p.prog
	width := len(text) + 1
	words := (len(prog.Inst)*width + 31) / 32
	if cap(m.visited) < words {
		m.visited = make([]uint32, words)
	}
	visited := m.visited[:words]
	clear(visited)
	visit := func(pc uint32, pos int) bool {
		n := int(pc)*width + pos
		if visited[n/32]&(1<<(n&31)) != 0 {
			return false
		}
		visited[n/32] |= 1 << (n & 31)
		return true
	}
	// context is the assertion context at pos.
	context := func(pos int) syntax.EmptyOp {
		r1, r2 := contextRune(prev), contextRune(next)
		if pos > 0 {
			r1, _ = utf8.DecodeLastRune(text[:pos])
		}
		if pos < len(text) {
			r2, _ = utf8.DecodeRune(text[pos:])
		}
		return syntax.EmptyOpContext(r1, r2)
	}
	jobs := m.jobs[:0]
	defer func() { m.jobs = jobs[:0] }()
	if visit(uint32(prog.Start), 0) {
		jobs = append(jobs, capJob{pc: uint32(prog.Start)})
	}
	for len(jobs) > 0 {
		j := jobs[len(jobs)-1]
		jobs = jobs[:len(jobs)-1]
		pc, pos, alt := j.pc, j.pos, j.alt
		for { // follows one path; each continue below abandons it
			in := &prog.Inst[pc]
			switch in.Op {
			case syntax.InstAlt, syntax.InstAltMatch:
				if alt {
					pc, alt = in.Arg, false
				} else {
					jobs = append(jobs, capJob{pc: pc, alt: true, pos: pos})
					pc = in.Out
				}
			case syntax.InstCapture:
				if alt { // done with what followed: restore
					m.cap[in.Arg] = pos
					goto next
				}
				if int(in.Arg) < len(m.cap) {
					jobs = append(jobs, capJob{pc: pc, alt: true, pos: m.cap[in.Arg]})
					m.cap[in.Arg] = pos
				}
				pc = in.Out
			case syntax.InstEmptyWidth:
				if syntax.EmptyOp(in.Arg)&^context(pos) != 0 {
					goto next
				}
				pc = in.Out
			case syntax.InstNop:
				pc = in.Out
			case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
				if run := &m.p.runs[pc]; run.lit != nil {
					if !bytes.HasPrefix(text[pos:], run.lit) {
						goto next
					}
					pc, pos = run.out, pos+len(run.lit)
					break
				}
				if pos == len(text) {
					goto next
				}
				r, w := rune(text[pos]), 1
				if r >= utf8.RuneSelf {
					r, w = utf8.DecodeRune(text[pos:])
				}
				switch in.Op {
				case syntax.InstRuneAny:
				case syntax.InstRuneAnyNotNL:
					if r == '\n' {
						goto next
					}
				default:
					if !in.MatchRune(r) {
						goto next
					}
				}
				pc, pos = in.Out, pos+w
			case syntax.InstMatch:
				if pos != len(text) {
					goto next
				}
				copy(dst, m.cap)
				dst[0], dst[1] = 0, len(text)
				return true
			default: // InstFail
				goto next
			}
			if !visit(pc, pos) {
				goto next
			}
		}
	next:
	}
	return false
}
