package engine

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"slices"
	"unicode/utf8"
)

// Priority chooses between matches that start at the same position.
type Priority int

const (
	// Longest: leftmost, then longest, then the rule declared first.
	Longest Priority = iota
	// First: leftmost, then the rule declared first, then leftmost-first
	// inside that rule's regexp (Perl and nginx replace_filter semantics).
	First
)

// Rule is one find-and-replace rule.
type Rule struct {
	Pattern     string // literal text if Literal, else RE2 syntax
	Literal     bool
	Replacement string // {placeholder} variables; regex rules also $1, ${name}, $$ (regexp.Expand)
	Once        bool   // the rule stops taking part after its first match
}

// Options tune a rule set. Zero values select the defaults.
type Options struct {
	Priority Priority
	// MaxMatch is the longest match, in bytes, that can be replaced: a
	// candidate that would grow past it is dropped (see Stream.Dropped).
	// It also bounds the bytes a stream holds back. Default 16 KiB.
	MaxMatch int
	// MaxInstructions bounds the size of the compiled automaton (NFA
	// instructions over all rules). Default 200,000.
	MaxInstructions int
	// CacheSize bounds the memory of the lazy DFA in bytes; when it is full
	// it is emptied and rebuilt on demand. Default 8 MiB.
	CacheSize int
}

// Defaults.
const (
	DefaultMaxMatch        = 16 << 10
	DefaultMaxInstructions = 200_000
	DefaultCacheSize       = 8 << 20
)

// Set is a compiled rule set. It is immutable apart from its internal DFA
// cache, and safe for concurrent use by any number of streams.
type Set struct {
	rules    []Rule
	prio     Priority
	maxMatch int
	prog     nfa
	dfa      *dfa
	tmpl     []template
	// ringSize is how many positions of the memo path a stream keeps (a
	// power of two; see pathMemo). Tests set 0 to turn the memo off.
	ringSize int
	// sparseStride (a power of two) and sparseSlots size the memo path's
	// sparse states, which cover MaxMatch.
	sparseStride, sparseSlots int
	caps                      []*capProg // per rule whose replacement uses groups, else nil
	maxCap                    int        // largest capProg.ncap
	varNames                  []string
	all                       Mask
	full                      [4]*state // start states with every rule active, by prevClass
	classes                   [256]uint8

	// Prefilter: a match can only start at i if (b[i], b[i+1]) is in pair,
	// or, for the last byte available, if b[i] is in first.
	first  [256]bool
	pair   [65536]uint8 // indexed by b[i] | b[i+1]<<8
	pair7  [32768]uint8 // pair folded on the low 7 bits of each byte (fits L1)
	triple [65536]uint8 // indexed by tripleHash(b[i], b[i+1], b[i+2])
	// Every match holds stride+2 bytes, so a scan may test one position in
	// stride: the triple there is one that a match holds at some offset
	// below stride (anchors is indexed by anchorHash; bit stride-1-o is
	// set if a match holds it at offset o). A stride of 1 turns this
	// stage off.
	stride  int
	anchors [1 << 15]uint8
	// litOwner, by litSlot of a triple: a literal rule that alone can
	// match where its first three bytes start (see Stream.literal), or -1.
	// Of two such triples in one slot, the first rule's keeps it.
	litOwner [litSlots]int32
	// teddy, if not nil, is the vector prefilter (teddy.go), used in
	// place of the two stages above where the CPU has it.
	teddy *teddyMasks
}

// buildLiteralOwners fills litOwner with the literal rules (3 bytes or
// longer, no longer than MaxMatch) whose first three bytes leave, from
// every start state, only that rule's threads and no match.
func (s *Set) buildLiteralOwners() {
	for i := range s.litOwner {
		s.litOwner[i] = -1
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
		if slot := &s.litOwner[litSlot(rule.Pattern[:3])]; *slot < 0 {
			*slot = int32(r)
		}
	}
}

// litSlots is the size of Set.litOwner (a power of two).
const litSlots = 1024

// litSlot is the litOwner slot of a triple.
func litSlot[T string | []byte](b T) int {
	return int(tripleHash(uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16)) & (litSlots - 1)
}

// Compile compiles rules into a Set. It refuses, naming the rule (1-based),
// patterns that do not parse, rules that can match the empty string,
// replacements that refer to missing groups, and rule sets whose automaton
// would exceed its bounds.
func Compile(rules []Rule, opts Options) (*Set, error) {
	if len(rules) == 0 {
		return nil, errors.New("no rules")
	}
	if opts.MaxMatch <= 0 {
		opts.MaxMatch = DefaultMaxMatch
	}
	if opts.MaxInstructions <= 0 {
		opts.MaxInstructions = DefaultMaxInstructions
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.Priority != Longest && opts.Priority != First {
		return nil, fmt.Errorf("unknown priority %d", opts.Priority)
	}
	s := &Set{
		rules:    append([]Rule(nil), rules...),
		prio:     opts.Priority,
		maxMatch: opts.MaxMatch,
		tmpl:     make([]template, len(rules)),
		caps:     make([]*capProg, len(rules)),
		all:      NewMask(len(rules)),
	}
	c := &compiler{p: &s.prog, max: opts.MaxInstructions}
	varIndex := func(name string) int {
		for i, n := range s.varNames {
			if n == name {
				return i
			}
		}
		s.varNames = append(s.varNames, name)
		return len(s.varNames) - 1
	}
	minLen := opts.MaxMatch // shortest match of any rule, in bytes
	for i, r := range rules {
		s.all.Add(i)
		c.rule = int32(i)
		fail := func(format string, args ...any) error { return ruleError(i, r, format, args...) }
		var f frag
		var parsed *syntax.Regexp
		numGroups, names := 0, []string(nil)
		if r.Literal {
			if r.Pattern == "" {
				return nil, fail("matches the empty string")
			}
			f = c.literal([]byte(r.Pattern))
			minLen = min(minLen, len(r.Pattern))
		} else {
			re, err := syntax.Parse(r.Pattern, syntax.Perl)
			if err != nil {
				return nil, fail("%v", err)
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
			return nil, fail("rule set too large: %v", c.err)
		}
		s.prog.start = append(s.prog.start, f.start)
		t, err := parseTemplate(r.Replacement, !r.Literal, func(name string) []int {
			return groupNumber(name, numGroups, names)
		}, varIndex)
		if err != nil {
			return nil, fail("%v", err)
		}
		s.tmpl[i] = t
		if t.groups {
			cp, err := newCapProg(parsed)
			if err != nil {
				return nil, fail("%v", err)
			}
			s.caps[i] = cp
			s.maxCap = max(s.maxCap, cp.ncap)
		}
	}
	s.buildClasses()
	var rep []byte
	for b := range 256 {
		if int(s.classes[b]) == len(rep) {
			rep = append(rep, byte(b))
		}
	}
	s.dfa = newDFA(&s.prog, s.prio == First, &s.classes, rep, opts.CacheSize)
	// The cache must hold a few of the largest possible states.
	if need := 4 * s.dfa.stateSize(len(s.prog.insts)); need > opts.CacheSize {
		// Set-wide: every rule adds to the states, so no rule is to blame.
		return nil, fmt.Errorf("rules: the %d rules need DFA states of up to %d bytes, more than the %d-byte DFA cache can hold 4 of: use fewer or simpler rules", len(rules), need/4, opts.CacheSize)
	}
	if err := s.checkEmpty(); err != nil {
		return nil, err
	}
	for p := range 4 {
		s.full[p] = s.dfa.start(s.all, p, true)
	}
	members := s.classMembers()
	if groups := s.buildPrefilter(members); groups != nil {
		s.buildTeddy(groups)
	}
	s.buildAnchors(members, minLen)
	s.buildLiteralOwners()
	s.ringSize = 128
	s.sparseStride = 64
	for s.maxMatch/s.sparseStride > 64 {
		s.sparseStride *= 2
	}
	s.sparseSlots = s.maxMatch/s.sparseStride + 2
	return s, nil
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

// MaxMatch returns the longest match the set replaces.
func (s *Set) MaxMatch() int { return s.maxMatch }

// CacheResets returns how many times the DFA cache filled up and was
// emptied; a steadily growing figure means the rule set thrashes its cache.
func (s *Set) CacheResets() int64 { return s.dfa.resets.Load() }

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

// buildPrefilter computes the byte pairs that can begin a match: b1 leaves
// some start state alive, and b2 then either keeps it alive or completes a
// one-byte match (pair, and its fold pair7); and likewise the byte triples
// (hashed, so the table may let through triples that cannot match, never
// the reverse). It returns those triples in groups for Teddy (see
// addTriples), or nil if the triple table was filled and passes every
// triple.
func (s *Set) buildPrefilter(members [][]byte) []teddyBucket {
	d := s.dfa
	nc := len(d.classRep)
	rows := map[*state]*[256]bool{} // classes allowed after t1
	// Rules with wide classes (. or \pL) allow so many triples that the
	// table would be full anyway; past this much work it is filled.
	budget := 1 << 18
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
				s.first[b] = true
			}
			row := rows[t1]
			if row == nil {
				row = new([256]bool)
				rows[t1] = row
				for c2 := range nc {
					row[c2] = d.next(t1, c2).alive()
				}
			}
			s.addTriples(t1, members[c1], members, &budget, &groups)
			for _, b1 := range members[c1] {
				for b2 := range 256 {
					if row[s.classes[b2]] {
						s.pair[uint16(b1)|uint16(b2)<<8] = 1
					}
				}
			}
		}
	}
	for x, v := range s.pair {
		s.pair7[x&0x7F7F] |= v
	}
	if budget < 0 {
		for i := range s.triple {
			s.triple[i] = 1
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
func (s *Set) addTriples(t1 *state, first []byte, members [][]byte, budget *int, groups *[]teddyBucket) {
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
						s.triple[tripleHash(uint32(b1)|uint32(b2)<<8|uint32(b3)<<16)] = 1
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
func (s *Set) buildAnchors(members [][]byte, minLen int) {
	s.stride = 1
	k := min(minLen-2, 3)
	if k < 2 {
		return
	}
	d := s.dfa
	nc := len(d.classRep)
	anchors := new([1 << 15]uint8)
	var level []*state
	seen := map[*state]bool{}
	for _, t := range s.full {
		if !seen[t] {
			seen[t] = true
			level = append(level, t)
		}
	}
	// A filled table passes every position and would only slow the scan.
	budget := 1 << 16
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
	s.stride, s.anchors = k, *anchors
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

// anchorHash hashes the three low bytes of x into 15 bits, so that the
// anchor table, a byte per entry and one load per test, fits the L1 cache.
func anchorHash(x uint32) uint16 {
	x &= 0xFFFFFF
	return uint16(x^x>>9) & anchorMask
}

const anchorMask = 1<<15 - 1

// anchorHashes hashes the triples of w at once: bits 8i..8i+14 of the
// result are anchorHash of bytes i..i+2 of w (i <= 5), since the hash of
// a triple reads no bit above it.
func anchorHashes(w uint64) uint64 { return w ^ w>>9 }
