package engine

import (
	"fmt"
	"regexp/syntax"
	"unicode"
	"unicode/utf8"
)

// The compiler. Each rule is parsed by regexp/syntax (literal rules are
// taken as bytes), simplified, and compiled into one byte-level NFA with an
// entry point and a match instruction per rule. Runes become the byte
// sequences of their UTF-8 encodings (the usual split of rune ranges into
// byte ranges), shared through a small trie so that \pL is not hundreds of
// threads; (?i) becomes each rune's case-folding orbit; ^ $ \A \z \b \B
// stay zero-width instructions, decided by the DFA.

// Instruction kinds of the byte-level NFA.
const (
	opByte  uint8 = iota // consume one byte in [lo, hi], go to out
	opSplit              // try out, then out1 (priority order)
	opEmpty              // zero-width assertion: go to out if the context satisfies empty
	opNop                // go to out
	opMatch              // rule matched
	opFail               // dead end
)

// inst is one NFA instruction. Every instruction belongs to one rule, so the
// set of rules still alive in a DFA state can be read from its threads.
type inst struct {
	op     uint8
	lo, hi byte
	empty  syntax.EmptyOp
	out    uint32
	out1   uint32
	rule   int32
}

// nfa is the program for a whole rule set: one entry point per rule, and an
// opMatch instruction per rule.
type nfa struct {
	insts []inst
	start []uint32 // entry point of each rule
}

// frag is a partially built piece of program with dangling exits.
type frag struct {
	start uint32
	outs  []uint32 // patch list: pc<<1 | (0 for out, 1 for out1)
}

type compiler struct {
	p    *nfa
	rule int32
	max  int
	err  error
}

func (c *compiler) emit(in inst) uint32 {
	if c.err == nil && len(c.p.insts) >= c.max {
		c.err = fmt.Errorf("automaton exceeds %d instructions", c.max)
	}
	in.rule = c.rule
	c.p.insts = append(c.p.insts, in)
	return uint32(len(c.p.insts) - 1)
}

func (c *compiler) patch(outs []uint32, to uint32) {
	for _, o := range outs {
		if o&1 == 0 {
			c.p.insts[o>>1].out = to
		} else {
			c.p.insts[o>>1].out1 = to
		}
	}
}

func (c *compiler) nop() frag {
	pc := c.emit(inst{op: opNop})
	return frag{start: pc, outs: []uint32{pc << 1}}
}

func (c *compiler) fail() frag {
	pc := c.emit(inst{op: opFail})
	return frag{start: pc}
}

func (c *compiler) byteRange(lo, hi byte) frag {
	pc := c.emit(inst{op: opByte, lo: lo, hi: hi})
	return frag{start: pc, outs: []uint32{pc << 1}}
}

func (c *compiler) cat(a, b frag) frag {
	c.patch(a.outs, b.start)
	return frag{start: a.start, outs: b.outs}
}

func (c *compiler) alt(a, b frag) frag {
	pc := c.emit(inst{op: opSplit, out: a.start, out1: b.start})
	return frag{start: pc, outs: append(append([]uint32(nil), a.outs...), b.outs...)}
}

// split emits a split that prefers x (or, when nonGreedy, skipping it) and
// returns its pc and the patch entry of its branch that skips x.
func (c *compiler) split(x frag, nonGreedy bool) (pc, skip uint32) {
	pc = c.emit(inst{op: opSplit})
	if nonGreedy {
		c.p.insts[pc].out1 = x.start
		return pc, pc << 1
	}
	c.p.insts[pc].out = x.start
	return pc, pc<<1 | 1
}

// star compiles x* (or x*? when nonGreedy).
func (c *compiler) star(x frag, nonGreedy bool) frag {
	pc, skip := c.split(x, nonGreedy)
	c.patch(x.outs, pc)
	return frag{start: pc, outs: []uint32{skip}}
}

func (c *compiler) plus(x frag, nonGreedy bool) frag {
	s := c.star(x, nonGreedy)
	return frag{start: x.start, outs: s.outs}
}

// quest compiles x? (or x?? when nonGreedy).
func (c *compiler) quest(x frag, nonGreedy bool) frag {
	pc, skip := c.split(x, nonGreedy)
	return frag{start: pc, outs: append(append([]uint32(nil), x.outs...), skip)}
}

// literal compiles a byte string.
func (c *compiler) literal(s []byte) frag {
	f := c.byteRange(s[0], s[0])
	for _, b := range s[1:] {
		f = c.cat(f, c.byteRange(b, b))
	}
	return f
}

// runeRanges compiles a set of rune ranges (pairs lo, hi) to the byte
// sequences of their UTF-8 encodings. Surrogates never match (they are not
// valid UTF-8), nor does any invalid byte.
func (c *compiler) runeRanges(r []rune) frag {
	var seqs [][][2]byte
	for i := 0; i+1 < len(r); i += 2 {
		utf8Sequences(r[i], r[i+1], func(seq [][2]byte) {
			seqs = append(seqs, append([][2]byte(nil), seq...))
		})
	}
	if len(seqs) == 0 {
		return c.fail()
	}
	// Share common leading byte ranges through a small trie so a class
	// like \pL does not become hundreds of parallel threads.
	return c.trie(seqs)
}

// trie compiles sequences of byte ranges, merging those that start with the
// same range. The order of alternatives is irrelevant: every sequence
// consumes a distinct set of byte strings.
func (c *compiler) trie(seqs [][][2]byte) frag {
	var groups [][][][2]byte
	var heads [][2]byte
	for _, s := range seqs {
		found := false
		for gi, h := range heads {
			if h == s[0] {
				groups[gi] = append(groups[gi], s)
				found = true
				break
			}
		}
		if !found {
			heads = append(heads, s[0])
			groups = append(groups, [][][2]byte{s})
		}
	}
	var result frag
	for gi, h := range heads {
		f := c.byteRange(h[0], h[1])
		var tails [][][2]byte
		direct := false
		for _, s := range groups[gi] {
			if len(s) == 1 {
				direct = true
			} else {
				tails = append(tails, s[1:])
			}
		}
		if len(tails) > 0 {
			t := c.trie(tails)
			if direct {
				// Cannot happen for UTF-8 (a prefix-free code), but keep it right.
				n := c.nop()
				t = c.alt(t, n)
			}
			f = c.cat(f, t)
		}
		if gi == 0 {
			result = f
		} else {
			result = c.alt(result, f)
		}
	}
	return result
}

func (c *compiler) compile(re *syntax.Regexp) frag {
	if c.err != nil {
		return c.nop()
	}
	switch re.Op {
	case syntax.OpNoMatch:
		return c.fail()
	case syntax.OpEmptyMatch:
		return c.nop()
	case syntax.OpLiteral:
		if len(re.Rune) == 0 {
			return c.nop()
		}
		var f frag
		for i, r := range re.Rune {
			var g frag
			if re.Flags&syntax.FoldCase != 0 {
				g = c.runeRanges(foldRanges(r))
			} else {
				g = c.runeRanges([]rune{r, r})
			}
			if i == 0 {
				f = g
			} else {
				f = c.cat(f, g)
			}
		}
		return f
	case syntax.OpCharClass:
		return c.runeRanges(re.Rune)
	case syntax.OpAnyCharNotNL:
		return c.runeRanges([]rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune})
	case syntax.OpAnyChar:
		return c.runeRanges([]rune{0, unicode.MaxRune})
	case syntax.OpBeginLine:
		return c.empty(syntax.EmptyBeginLine)
	case syntax.OpEndLine:
		return c.empty(syntax.EmptyEndLine)
	case syntax.OpBeginText:
		return c.empty(syntax.EmptyBeginText)
	case syntax.OpEndText:
		return c.empty(syntax.EmptyEndText)
	case syntax.OpWordBoundary:
		return c.empty(syntax.EmptyWordBoundary)
	case syntax.OpNoWordBoundary:
		return c.empty(syntax.EmptyNoWordBoundary)
	case syntax.OpCapture:
		return c.compile(re.Sub[0])
	case syntax.OpStar:
		return c.star(c.compile(re.Sub[0]), re.Flags&syntax.NonGreedy != 0)
	case syntax.OpPlus:
		return c.plus(c.compile(re.Sub[0]), re.Flags&syntax.NonGreedy != 0)
	case syntax.OpQuest:
		return c.quest(c.compile(re.Sub[0]), re.Flags&syntax.NonGreedy != 0)
	case syntax.OpConcat:
		if len(re.Sub) == 0 {
			return c.nop()
		}
		f := c.compile(re.Sub[0])
		for _, sub := range re.Sub[1:] {
			f = c.cat(f, c.compile(sub))
		}
		return f
	case syntax.OpAlternate:
		f := c.compile(re.Sub[0])
		for _, sub := range re.Sub[1:] {
			f = c.alt(f, c.compile(sub))
		}
		return f
	}
	// OpRepeat is gone after Simplify.
	c.err = fmt.Errorf("unsupported regexp operator %v", re.Op)
	return c.nop()
}

func (c *compiler) empty(op syntax.EmptyOp) frag {
	pc := c.emit(inst{op: opEmpty, empty: op})
	return frag{start: pc, outs: []uint32{pc << 1}}
}

// foldRanges returns the case-folding orbit of r as rune ranges.
func foldRanges(r rune) []rune {
	out := []rune{r, r}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		out = append(out, f, f)
	}
	return out
}

// utf8Sequences calls fn with each sequence of byte ranges whose
// concatenations are exactly the UTF-8 encodings of the runes in [lo, hi]
// (surrogates excluded). This is the classic split used by RE2 and Rust's
// utf8-ranges: cut the range until each piece is a cross product of byte
// ranges.
func utf8Sequences(lo, hi rune, fn func([][2]byte)) {
	if lo > hi {
		return
	}
	if lo <= 0xDFFF && hi >= 0xD800 {
		utf8Sequences(lo, 0xD7FF, fn)
		utf8Sequences(0xE000, hi, fn)
		return
	}
	for _, max := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= max && hi > max {
			utf8Sequences(lo, max, fn)
			utf8Sequences(max+1, hi, fn)
			return
		}
	}
	if hi < utf8.RuneSelf {
		fn([][2]byte{{byte(lo), byte(hi)}})
		return
	}
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				utf8Sequences(lo, lo|m, fn)
				utf8Sequences((lo|m)+1, hi, fn)
				return
			}
			if hi&m != m {
				utf8Sequences(lo, (hi&^m)-1, fn)
				utf8Sequences(hi&^m, hi, fn)
				return
			}
		}
	}
	var a, b [4]byte
	utf8.EncodeRune(a[:], lo)
	utf8.EncodeRune(b[:], hi)
	seq := make([][2]byte, n)
	for i := range n {
		seq[i] = [2]byte{a[i], b[i]}
	}
	fn(seq)
}
