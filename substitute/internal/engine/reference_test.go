package engine

import (
	"bytes"
	"regexp"
	"regexp/syntax"
	"unicode/utf8"
)

// reference substitutes a whole, valid UTF-8 body with Go's regexp, trying
// every rule at every position: the specification the streaming engine is
// checked against. It ignores MaxMatch (tests compare with it only when
// nothing was dropped).
func reference(rules []Rule, prio Priority, vars Vars, input []byte) []byte {
	type refRule struct {
		atStart, after *regexp.Regexp // \A(?:pat) and \A(?s:.)(?:pat)
		spans          [4]*regexp.Regexp
	}
	rs := make([]refRule, len(rules))
	for i, r := range rules {
		pat := refPattern(r)
		rs[i].atStart = regexp.MustCompile(`\A(?:` + pat + `)`)
		rs[i].after = regexp.MustCompile(`\A(?s:.)(?:` + pat + `)`)
		if prio == Longest {
			rs[i].atStart.Longest()
			rs[i].after.Longest()
		}
		rs[i].spans = refSpans(pat)
	}
	active := make([]bool, len(rules))
	for i := range active {
		active[i] = true
	}
	var out []byte
	pos := 0
	for pos < len(input) {
		found := false
		for p := pos; p < len(input) && !found; p++ {
			if !utf8.RuneStart(input[p]) {
				continue
			}
			bestEnd, bestRule := -1, -1
			var bestIdx []int
			for r := range rules {
				if !active[r] {
					continue
				}
				var idx []int
				if p == 0 {
					idx = rs[r].atStart.FindSubmatchIndex(input)
				} else {
					idx = rs[r].after.FindSubmatchIndex(input[p-1:])
					// drop the context rune from group 0, shift to input offsets
					if idx != nil {
						for k := range idx {
							if idx[k] >= 0 {
								idx[k] += p - 1
							}
						}
						idx[0] = p
					}
				}
				if idx == nil {
					continue
				}
				if prio == First {
					bestEnd, bestRule, bestIdx = idx[1], r, idx
					break
				}
				if idx[1] > bestEnd {
					bestEnd, bestRule, bestIdx = idx[1], r, idx
				}
			}
			if bestRule < 0 {
				continue
			}
			found = true
			if prio == Longest {
				// Submatches are those of the leftmost-first parse of the span.
				v, lo, hi := 0, p, bestEnd
				if p > 0 {
					v |= 2
					lo--
				}
				if bestEnd < len(input) {
					v |= 1
					hi++
				}
				bestIdx = rs[bestRule].spans[v].FindSubmatchIndex(input[lo:hi])
				for k := range bestIdx {
					if bestIdx[k] >= 0 {
						bestIdx[k] += lo
					}
				}
				bestIdx[0], bestIdx[1] = p, bestEnd
			}
			out = append(out, input[pos:p]...)
			out = refExpand(out, rules[bestRule], rs[bestRule].after, input, bestIdx, vars)
			pos = bestEnd
			if rules[bestRule].Once {
				active[bestRule] = false
			}
		}
		if !found {
			break
		}
	}
	return append(out, input[pos:]...)
}

// refPattern is a rule's pattern in Go's regexp syntax, in canonical form,
// safe to wrap (\Q without \E is not).
func refPattern(r Rule) string {
	if r.Literal {
		return regexp.QuoteMeta(r.Pattern)
	}
	re, err := syntax.Parse(r.Pattern, syntax.Perl)
	if err != nil {
		panic(err)
	}
	return re.String()
}

// refSpans matches pat against a whole span, with the rune before it
// (v&2) and the rune after it (v&1) as context.
func refSpans(pat string) (spans [4]*regexp.Regexp) {
	for v := range 4 {
		p := `\A`
		if v&2 != 0 {
			p += `(?s:.)`
		}
		p += `(?:` + pat + `)`
		if v&1 != 0 {
			p += `(?s:.)`
		}
		spans[v] = regexp.MustCompile(p + `\z`)
	}
	return spans
}

// refToken finds $ references as regexp.Expand reads them (a name is a run
// of Unicode letters, digits and _) and {name} placeholders; refPlaceholder
// finds placeholders alone, for literal rules, whose $ is plain text.
var (
	refToken       = regexp.MustCompile(`\$\$|\$\{[\pL\p{Nd}_]+\}|\$[\pL\p{Nd}_]+|\{[A-Za-z0-9._-]+\}`)
	refPlaceholder = regexp.MustCompile(`\{[A-Za-z0-9._-]+\}`)
)

// refExpand expands a replacement with regexp.Expand for $ references and
// vars for {name} placeholders.
func refExpand(out []byte, r Rule, rx *regexp.Regexp, input []byte, idx []int, vars Vars) []byte {
	tmpl := r.Replacement
	last := 0
	tokens := refToken
	if r.Literal {
		tokens = refPlaceholder
	}
	for _, loc := range tokens.FindAllStringIndex(tmpl, -1) {
		out = append(out, tmpl[last:loc[0]]...)
		tok := tmpl[loc[0]:loc[1]]
		last = loc[1]
		switch {
		case tok == "$$":
			out = append(out, '$')
		case tok[0] == '$':
			out = rx.Expand(out, []byte(tok), input, idx)
		default:
			v, ok := "", false
			if vars != nil {
				v, ok = vars(tok[1 : len(tok)-1])
			}
			if ok {
				out = append(out, v...)
			} else {
				out = append(out, tok...)
			}
		}
	}
	return append(out, tmpl[last:]...)
}

// runNoMemo is run with the memo path off (a ring of no positions) and the
// guard never on: every candidate gets an attempt that runs on its own, the
// plain behaviour the memo and the guard must not change (the guard's
// drops apart, see runGuarded).
func runNoMemo(s *Set, vars Vars, input []byte, chunks []int) ([]byte, *Stream, error) {
	ring := s.memoShape.ring
	s.memoShape.ring = 0
	defer func() { s.memoShape.ring = ring }()
	return runGuard(s, guardNever, vars, input, chunks)
}

// runGuard is run with the guard on from the first byte, or never on.
// With the guard on, Dropped counts only the candidates attempted, so
// tests compare its output only.
func runGuard(s *Set, mode guardMode, vars Vars, input []byte, chunks []int) ([]byte, *Stream, error) {
	old := s.guardMode
	s.guardMode = mode
	defer func() { s.guardMode = old }()
	return run(s, vars, input, chunks)
}

// run substitutes input written in the given chunk sizes (cycled), then
// closed.
func run(s *Set, vars Vars, input []byte, chunks []int) ([]byte, *Stream, error) {
	var buf bytes.Buffer
	st := s.NewStream(&buf, vars)
	ci := 0
	for len(input) > 0 {
		n := len(input)
		if len(chunks) > 0 {
			n = min(chunks[ci%len(chunks)], n)
			ci++
		}
		if _, err := st.Write(input[:n]); err != nil {
			return nil, st, err
		}
		input = input[n:]
	}
	if err := st.Close(); err != nil {
		return nil, st, err
	}
	return buf.Bytes(), st, nil
}
