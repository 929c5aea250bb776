package engine

import (
	"fmt"
	"regexp/syntax"
	"unicode/utf8"
)

// compileRules compiles every rule into s.prog (one entry point and one
// match instruction per rule), parses its replacement into s.tmpl, and
// prepares a capture program for rules whose replacement uses groups. It
// returns a lower bound of the length of every match, at most MaxMatch.
func (s *Set) compileRules(maxInstructions int) (minLen int, err error) {
	s.tmpl = make([]template, len(s.rules))
	s.caps = make([]*capProg, len(s.rules))
	c := &compiler{p: &s.prog, max: maxInstructions}
	varIndex := func(name string) int {
		for i, n := range s.varNames {
			if n == name {
				return i
			}
		}
		s.varNames = append(s.varNames, name)
		return len(s.varNames) - 1
	}
	minLen = s.maxMatch
	for i, r := range s.rules {
		s.all.Add(i)
		c.rule = int32(i)
		fail := func(format string, args ...any) error { return ruleError(i, r, format, args...) }
		var f frag
		var parsed *syntax.Regexp
		numGroups, names := 0, []string(nil)
		if r.Literal {
			if r.Pattern == "" {
				return 0, fail("matches the empty string")
			}
			f = c.literal([]byte(r.Pattern))
			minLen = min(minLen, len(r.Pattern))
		} else {
			re, err := syntax.Parse(r.Pattern, syntax.Perl)
			if err != nil {
				return 0, fail("%v", err)
			}
			numGroups, names = re.MaxCap(), re.CapNames()
			parsed = re
			simple := re.Simplify()
			minLen = min(minLen, minBytes(simple))
			f = c.compile(simple)
		}
		m := c.emit(inst{op: opMatch})
		c.patch(f.outs, m)
		if c.err != nil {
			return 0, fail("rule set too large: %v", c.err)
		}
		s.prog.start = append(s.prog.start, f.start)
		t, err := parseTemplate(r.Replacement, !r.Literal, func(name string) []int {
			return groupNumber(name, numGroups, names)
		}, varIndex)
		if err != nil {
			return 0, fail("%v", err)
		}
		s.tmpl[i] = t
		if t.groups {
			cp, err := newCapProg(parsed)
			if err != nil {
				return 0, fail("%v", err)
			}
			s.caps[i] = cp
			s.maxCap = max(s.maxCap, cp.ncap)
		}
	}
	return minLen, nil
}

// ruleError is an error about rule i (0-based), naming it as Compile's
// errors do: "rule 2: regex "a*": ...".
func ruleError(i int, r Rule, format string, args ...any) error {
	kind := "regex"
	if r.Literal {
		kind = "literal"
	}
	return fmt.Errorf("rule %d: %s %q: %s", i+1, kind, r.Pattern, fmt.Sprintf(format, args...))
}

// buildClasses groups bytes that no instruction tells apart. Word bytes and
// '\n' are always told apart from the rest, for zero-width assertions.
func (s *Set) buildClasses() {
	var cut [257]bool
	mark := func(lo, hi int) { cut[lo], cut[hi+1] = true, true }
	mark('0', '9')
	mark('A', 'Z')
	mark('_', '_')
	mark('a', 'z')
	mark('\n', '\n')
	for _, in := range s.prog.insts {
		if in.op == opByte {
			mark(int(in.lo), int(in.hi))
		}
	}
	c := uint8(0)
	for b := range 256 {
		if b > 0 && cut[b] {
			c++
		}
		s.classes[b] = c
	}
}

// classMembers lists the bytes of each byte class.
func (s *Set) classMembers() [][]byte {
	members := make([][]byte, len(s.dfa.classRep))
	for b := range 256 {
		members[s.classes[b]] = append(members[s.classes[b]], byte(b))
	}
	return members
}

// classReps returns a byte of each byte class, in class order.
func (s *Set) classReps() []byte {
	var rep []byte
	for b := range 256 {
		if int(s.classes[b]) == len(rep) {
			rep = append(rep, byte(b))
		}
	}
	return rep
}

// checkEmpty refuses rules that match the empty string in some context.
func (s *Set) checkEmpty() error {
	d := s.dfa
	d.mu.Lock()
	defer d.mu.Unlock()
	for r, pc := range s.prog.start {
		for _, flags := range startFlags {
			for _, next := range []int{-1, '\n', 'a', ' '} {
				if d.step(flags, []uint32{pc}, next) >= 0 {
					return ruleError(r, s.rules[r], "matches the empty string")
				}
			}
		}
	}
	return nil
}

// minBytes returns a lower bound of the length in bytes of re's matches.
func minBytes(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return len(re.Rune) // a fold may be shorter in UTF-8 (ſ and s)
		}
		n := 0
		for _, r := range re.Rune {
			n += utf8.RuneLen(r)
		}
		return n
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpPlus:
		return minBytes(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min * minBytes(re.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, sub := range re.Sub {
			n += minBytes(sub)
		}
		return n
	case syntax.OpAlternate:
		n := -1
		for _, sub := range re.Sub {
			if m := minBytes(sub); n < 0 || m < n {
				n = m
			}
		}
		return max(n, 0)
	}
	return 0 // empty-width, star, quest, empty, no match
}
