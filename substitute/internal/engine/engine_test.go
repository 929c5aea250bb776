package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"testing"
)

func mustCompile(t testing.TB, rules []Rule, opts Options) *Set {
	t.Helper()
	s, err := Compile(rules, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// check substitutes input in one write and in every split into two chunks
// and in 1-byte chunks, and wants the same output each time.
func check(t *testing.T, s *Set, vars Vars, input, want string) *Stream {
	t.Helper()
	got, st, err := run(s, vars, []byte(input), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("input %q: got %q, want %q", input, got, want)
	}
	for cut := 1; cut < len(input); cut++ {
		got, _, _ := run(s, vars, []byte(input), []int{cut, len(input)})
		if string(got) != want {
			t.Fatalf("input %q split at %d: got %q, want %q", input, cut, got, want)
		}
	}
	got, _, _ = run(s, vars, []byte(input), []int{1})
	if string(got) != want {
		t.Fatalf("input %q in 1-byte chunks: got %q, want %q", input, got, want)
	}
	return st
}

func lit(p, r string) Rule { return Rule{Pattern: p, Literal: true, Replacement: r} }
func rx(p, r string) Rule  { return Rule{Pattern: p, Replacement: r} }

func TestNamedCases(t *testing.T) {
	tests := []struct {
		name  string
		rules []Rule
		opts  Options
		in    string
		want  string
	}{
		{"abcd|ab across chunks", []Rule{rx("abcd|ab", "X")}, Options{}, "ab" + "cd", "X"},
		{"abcd|ab first", []Rule{rx("ab|abcd", "X")}, Options{Priority: First}, "abcd", "Xcd"},
		{"abcd|ab longest", []Rule{rx("ab|abcd", "X")}, Options{}, "abcd", "X"},
		{"abcd|ab prefix only", []Rule{rx("abcd|ab", "X")}, Options{}, "abc", "Xc"},
		{"tie: first declared wins", []Rule{lit("abc", "1"), rx("a.c", "2")}, Options{}, "abc", "1"},
		{"tie reversed", []Rule{rx("a.c", "2"), lit("abc", "1")}, Options{}, "abc", "2"},
		{"longest across rules", []Rule{lit("ab", "1"), lit("abc", "2")}, Options{}, "abcab", "21"},
		{"first across rules", []Rule{lit("ab", "1"), lit("abc", "2")}, Options{Priority: First}, "abcab", "1c1"},
		{"leftmost beats longer later", []Rule{lit("bcd", "1"), lit("ab", "2")}, Options{}, "abcd", "2cd"},
		{"first: leftmost-first inside regex", []Rule{rx("a+?", "X")}, Options{Priority: First}, "aaa", "XXX"},
		{"longest ignores laziness", []Rule{rx("a+?", "X")}, Options{}, "aaa", "X"},
		{"no overlap", []Rule{lit("aa", "X")}, Options{}, "aaaaa", "XXa"},
		{"once", []Rule{{Pattern: "a", Literal: true, Replacement: "X", Once: true}, lit("b", "Y")}, Options{}, "abab", "XYaY"},
		{"once lets the next rule win", []Rule{{Pattern: "ab", Literal: true, Replacement: "1", Once: true}, lit("a", "2")}, Options{}, "abab", "12b"},
		{"captures", []Rule{rx(`(\w+)@(\w+)`, "$2 at $1")}, Options{}, "mail bob@example now", "mail example at bob now"},
		{"named captures and $$", []Rule{rx(`(?P<n>\d+)€`, "$$${n} $${n}")}, Options{}, "cost 12€.", "cost $12 ${n}."},
		{"$ verbatim on a literal", []Rule{lit("ab", "[$0 $$]")}, Options{}, "xaby", "x[$0 $$]y"},
		{"multi-byte split", []Rule{lit("héllo wörld", "hi")}, Options{}, "say héllo wörld!", "say hi!"},
		{"(?i) Unicode", []Rule{rx(`(?i)straße|ÄRGER`, "X")}, Options{}, "STRASSE strasse STRAßE ärger Ärger", "STRASSE strasse X X X"},
		{"(?i) kelvin sign", []Rule{rx(`(?i)k`, "X")}, Options{}, "k K \u212a", "X X X"},
		{"Unicode class", []Rule{rx(`\p{Greek}+`, "G")}, Options{}, "abc αβγ def", "abc G def"},
		{"word boundary at end", []Rule{rx(`foo\b`, "X")}, Options{}, "foo foobar foo", "X foobar X"},
		{"word boundary at start", []Rule{rx(`\bbar`, "X")}, Options{}, "bar foobar bar", "X foobar X"},
		{"not word boundary", []Rule{rx(`\Boo`, "X")}, Options{}, "oo foo", "oo fX"},
		{"dollar at end only", []Rule{rx(`end$`, "X")}, Options{}, "end end\nend", "end end\nX"},
		{"multiline dollar", []Rule{rx(`(?m)end$`, "X")}, Options{}, "end end\nend", "end X\nX"},
		{"caret", []Rule{rx(`^a`, "X")}, Options{}, "aaa", "Xaa"},
		{"multiline caret", []Rule{rx(`(?m)^a`, "X")}, Options{}, "aa\naa", "Xa\nXa"},
		{"\\z", []Rule{rx(`a\z`, "X")}, Options{}, "aaa", "aaX"},
		{"\\A", []Rule{rx(`\Aa`, "X")}, Options{}, "aaa", "Xaa"},
		{"max_match drops the long candidate", []Rule{rx(`<[^>]*>`, "T"), lit("<", "L")}, Options{MaxMatch: 8}, "<abc> <abcdefghijk>", "T Labcdefghijk>"},
		{"max_match exact length kept", []Rule{rx(`a+`, "X")}, Options{MaxMatch: 4}, "aaaa b", "X b"},
		{"max_match drop then shorter rule", []Rule{rx(`a+`, "X"), lit("aa", "Y")}, Options{MaxMatch: 4}, "aaaaaaa", "YYX"},
		{"empty replacement", []Rule{lit("<b>", "")}, Options{}, "a<b>c", "ac"},
		{"placeholder", []Rule{lit("HOST", "{http.request.host}")}, Options{}, "at HOST.", "at example.com$1."},
		{"unknown placeholder stays", []Rule{lit("X", "{nope} {}")}, Options{}, "X", "{nope} {}"},
		{"invalid UTF-8 passes through", []Rule{lit("b", "B")}, Options{}, "a\xffb\xc3", "a\xffB\xc3"},
	}
	vars := func(name string) (string, bool) {
		if name == "http.request.host" {
			return "example.com$1", true
		}
		return "", false
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, tc.rules, tc.opts)
			check(t, s, vars, tc.in, tc.want)
		})
	}
}

func TestDroppedCounted(t *testing.T) {
	s := mustCompile(t, []Rule{rx(`a+`, "X"), lit("aa", "Y")}, Options{MaxMatch: 4})
	st := check(t, s, nil, "aaaaaaa", "YYX")
	// a+ is dropped at 0 and 2 (still growing after 4 bytes), so "aa"
	// wins there; at 4, a+ ends within 4 bytes and is longest.
	if st.Dropped() != 2 {
		t.Fatalf("Dropped() = %d, want 2", st.Dropped())
	}
	m := st.Matched()
	if !m.Has(0) || !m.Has(1) {
		t.Fatalf("Matched() = %v, want both rules", m)
	}
}

func TestMatched(t *testing.T) {
	s := mustCompile(t, []Rule{lit("a", "1"), lit("b", "2"), lit("c", "3")}, Options{})
	var buf bytes.Buffer
	st := s.NewStream(&buf, nil)
	st.Write([]byte("xaxcx"))
	st.Close()
	if buf.String() != "x1x3x" {
		t.Fatalf("got %q", buf.String())
	}
	m := st.Matched()
	if !m.Has(0) || m.Has(1) || !m.Has(2) {
		t.Fatalf("Matched() = %v", m)
	}
	buf.Reset()
	st.Reset(&buf, nil)
	st.Write([]byte("xyz"))
	st.Close()
	if buf.String() != "xyz" || !st.Matched().Empty() {
		t.Fatalf("no match: got %q, Matched() = %v", buf.String(), st.Matched())
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		rules []Rule
		want  string
	}{
		{[]Rule{lit("a", ""), rx(`a*`, "")}, `rule 2: regex "a*": matches the empty string`},
		{[]Rule{rx(`\b`, "")}, `rule 1: regex "\\b": matches the empty string`},
		{[]Rule{rx(`(?m)^$`, "")}, `matches the empty string`},
		{[]Rule{rx(`x|`, "")}, `rule 1: regex "x|": matches the empty string`},
		{[]Rule{lit("", "")}, `rule 1: literal "": matches the empty string`},
		{[]Rule{lit("a", ""), lit("b", ""), rx(`a(`, "")}, `rule 3: regex "a(": error parsing regexp: missing closing )`},
		{[]Rule{rx(`(a)`, "$2")}, `rule 1: regex "(a)": replacement "$2" refers to group "2"`},
		{[]Rule{rx(`\p{L}{1000}`, "")}, `rule 1: regex "\\p{L}{1000}": rule set too large`},
	}
	for _, tc := range tests {
		_, err := Compile(tc.rules, Options{MaxInstructions: 100_000})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%v) = %v, want error containing %q", tc.rules, err, tc.want)
		}
	}
	// Empty-width assertions that cannot all hold do not match empty.
	if _, err := Compile([]Rule{rx(`\b\Ba|b`, "")}, Options{}); err != nil {
		t.Errorf("unexpected error: %v", err)
	}
}

// TestCacheTooSmallNamesSet: a DFA cache too small for the set's states is
// the whole set's fault, so the error names the set, not the last rule.
func TestCacheTooSmallNamesSet(t *testing.T) {
	_, err := Compile([]Rule{lit("a", ""), rx(`b[a-z]+c`, "")}, Options{CacheSize: 256})
	if err == nil {
		t.Fatal("Compile with a 256-byte cache succeeded, want an error")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "rules: the 2 rules need DFA states of up to ") ||
		!strings.Contains(msg, "more than the 256-byte DFA cache can hold 4 of: use fewer or simpler rules") {
		t.Errorf("error %q does not name the set, its cache size and the fix", msg)
	}
	if strings.Contains(msg, "rule 2") {
		t.Errorf("error %q blames the last rule", msg)
	}
}

// TestWriteErrorSticks: a failing dst stops the stream with its error.
func TestWriteErrorSticks(t *testing.T) {
	s := mustCompile(t, []Rule{lit("a", "b")}, Options{})
	st := s.NewStream(failWriter{}, nil)
	if _, err := st.Write([]byte("xxa")); err == nil {
		t.Fatal("want error")
	}
	if _, err := st.Write([]byte("x")); err == nil {
		t.Fatal("want sticky error")
	}
	if err := st.Close(); err == nil {
		t.Fatal("want error from Close")
	}
}

type failWriter struct{}

func (failWriter) Write(p []byte) (int, error) { return 0, fmt.Errorf("broken pipe") }

// Random rule sets over a small alphabet, so that rules overlap and tie.
var (
	randLits   = []string{"a", "b", "ab", "ba", "aab", "é", "aé", "Ä", " ", "\n", "a b", "bb"}
	randPieces = []string{
		"a", "b", "ab", "é", "[ab]", "[^a]", ".", "(?s:.)", "a*", "b+", "a?b", "(a|ab)", "(ab|a)", "a+?",
		`\b`, `\B`, "$", "^", "(?m:^)", "(?m:$)", `\A`, `\z`, "(?i:ä)", "(?i:a)", `\pL`, `\s`, `\w+`,
		"a{1,3}", "(b)", "(?P<x>a|é)", "[é-ë]+", "(?:a|b)*?b",
		// Bounded repeats, the guard's business.
		"a{2,7}", "[ab]{1,9}b", "(?:ab){1,4}", ".{0,6}a", `\w{2,5}\b`, "(?:a{1,3}b?){2,3}",
	}
)

func randRules(rng *rand.Rand) []Rule {
	n := 1 + rng.IntN(5)
	var rules []Rule
	for len(rules) < n {
		var r Rule
		if rng.IntN(3) == 0 {
			r = Rule{Pattern: randLits[rng.IntN(len(randLits))], Literal: true}
		} else {
			var p strings.Builder
			for range 1 + rng.IntN(3) {
				p.WriteString(randPieces[rng.IntN(len(randPieces))])
			}
			pat := p.String()
			if rng.IntN(4) == 0 {
				pat += "|" + randPieces[rng.IntN(len(randPieces))]
			}
			r = Rule{Pattern: pat}
		}
		switch rng.IntN(6) {
		case 0:
			r.Replacement = ""
		case 1:
			r.Replacement = "<$0>"
		case 2:
			if strings.Contains(r.Pattern, "(b)") || strings.Contains(r.Pattern, "(a|ab)") {
				r.Replacement = "[$1]"
			} else if strings.Contains(r.Pattern, "(?P<x>") {
				r.Replacement = "${x}$$"
			} else {
				r.Replacement = "{v}"
			}
		case 3:
			r.Replacement = "{v}-{w}"
		default:
			r.Replacement = fmt.Sprintf("R%d", len(rules))
		}
		r.Once = rng.IntN(5) == 0
		if _, err := Compile([]Rule{r}, Options{}); err != nil {
			continue // matches the empty string
		}
		rules = append(rules, r)
	}
	return rules
}

func randInput(rng *rand.Rand) []byte {
	alpha := []string{"a", "b", "a", "b", " ", "\n", "é", "ä", "Ä", "x", "ab"}
	var b []byte
	for range rng.IntN(80) { // up to ~100 bytes: a few of Teddy's blocks
		b = append(b, alpha[rng.IntN(len(alpha))]...)
	}
	return b
}

func randVars(name string) (string, bool) {
	if name == "v" {
		return "$1{w}", true
	}
	return "", false
}

// TestAgainstReference compares the engine with the reference on random
// rule sets and bodies, in one write and in random chunkings down to 1 byte.
func TestAgainstReference(t *testing.T) {
	iters := 4000
	if testing.Short() || raceEnabled {
		iters = 400
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for it := range iters {
		rules := randRules(rng)
		prio := Priority(rng.IntN(2))
		input := randInput(rng)
		checkOne(t, rules, prio, input, rng, it)
	}
}

func checkOne(t *testing.T, rules []Rule, prio Priority, input []byte, rng *rand.Rand, it int) {
	t.Helper()
	want := reference(rules, prio, randVars, input)
	for _, maxMatch := range []int{0, 1 + rng.IntN(6)} {
		// A tiny DFA cache now and then: it is emptied over and over while
		// streams run, which must not change any output.
		cache := 0
		if rng.IntN(4) == 0 {
			cache = 1 << 16
		}
		s, err := Compile(rules, Options{Priority: prio, MaxMatch: maxMatch, CacheSize: cache})
		if err != nil && cache != 0 { // too large for the tiny cache
			s, err = Compile(rules, Options{Priority: prio, MaxMatch: maxMatch})
		}
		if err != nil {
			t.Fatalf("#%d: %v", it, err)
		}
		// A memo ring of 2, 4 or 8 positions and sparse states every 1 to
		// 8, so short bodies wrap them.
		s.memoShape.ring = 2 << rng.IntN(3)
		s.memoShape.stride = 1 << rng.IntN(4)
		s.memoShape.slots = s.maxMatch/s.memoShape.stride + 2
		checkScans(t, s, want, input, rng, fmt.Sprintf("#%d rules %+v prio %d max %d", it, rules, prio, maxMatch))
	}
}

// checkScans runs checkStream with the vector prefilter, if the Set has
// one, and with the scalar scan.
func checkScans(t *testing.T, s *Set, want, input []byte, rng *rand.Rand, what string) {
	t.Helper()
	if s.pre.teddy != nil && useTeddy {
		checkStream(t, s, want, input, rng, what+" teddy")
		s.pre.teddy = nil
	}
	checkStream(t, s, want, input, rng, what)
}

// checkGuarded checks that s's output with the guard on from the first
// byte is want, in one write and in chunks of various sizes.
func checkGuarded(t *testing.T, s *Set, want, input []byte, rng *rand.Rand, what string) {
	t.Helper()
	for _, chunks := range [][]int{nil, {1}, {1 + rng.IntN(4), 1 + rng.IntN(7)}} {
		got, _, err := runGuard(s, guardAlways, randVars, input, chunks)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s input %q chunks %v: guarded output %q, want %q", what, input, chunks, got, want)
		}
	}
}

// checkStream checks s's output on input against want (unless a rule was
// dropped), with and without the memo and in chunks of various sizes.
func checkStream(t *testing.T, s *Set, want, input []byte, rng *rand.Rand, what string) {
	t.Helper()
	whole, st, err := runGuard(s, guardNever, randVars, input, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Dropped() == 0 && !bytes.Equal(whole, want) {
		t.Fatalf("%s input %q:\n got %q\nwant %q", what, input, whole, want)
	}
	// Drops are outside the reference: the memo must not change them.
	plain, pst, err := runNoMemo(s, randVars, input, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plain, whole) || pst.Dropped() != st.Dropped() {
		t.Fatalf("%s input %q: with memo %q (%d dropped), without %q (%d dropped)", what, input, whole, st.Dropped(), plain, pst.Dropped())
	}
	checkGuarded(t, s, whole, input, rng, what)
	for _, chunks := range [][]int{{1}, {1 + rng.IntN(4), 1 + rng.IntN(7)}, {rng.IntN(len(input) + 1)}} {
		if chunks[0] == 0 {
			chunks[0] = 1
		}
		got, _, err := run(s, randVars, input, chunks)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, whole) {
			t.Fatalf("%s input %q chunks %v:\n got %q\nwant %q", what, input, chunks, got, whole)
		}
	}
}

// TestCacheResets: with a DFA cache too small for the rule set, the cache is
// emptied again and again, memory stays bounded and the output is unchanged.
func TestCacheResets(t *testing.T) {
	data, err := os.ReadFile("testdata/rustc-book.html")
	if err != nil {
		t.Fatal(err)
	}
	data = data[:200_000]
	rules := benchRules(50)
	big := mustCompile(t, rules, Options{})
	want, _, err := run(big, nil, data, []int{4096})
	if err != nil {
		t.Fatal(err)
	}
	small := mustCompile(t, rules, Options{CacheSize: 1 << 16})
	before := small.CacheResets()
	got, _, err := run(small, nil, data, []int{4096})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("output differs with a small DFA cache")
	}
	if small.CacheResets() == before {
		t.Fatal("the small cache was never reset; the test does not exercise resets")
	}
	if small.dfa.size > 1<<16 {
		t.Fatalf("cache holds %d bytes, limit %d", small.dfa.size, 1<<16)
	}
}

// TestConcurrentStreams: streams of one Set run in parallel (go test -race
// checks the shared DFA cache) and each gets the output of a lone stream.
func TestConcurrentStreams(t *testing.T) {
	data, err := os.ReadFile("testdata/react-dom.development.js")
	if err != nil {
		t.Fatal(err)
	}
	data = data[:100_000]
	s := mustCompile(t, benchRules(50), Options{CacheSize: 1 << 19})
	want, _, err := run(mustCompile(t, benchRules(50), Options{}), nil, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, _, err := run(s, nil, data, []int{1 + 977*g, 13})
			if err == nil && !bytes.Equal(got, want) {
				err = fmt.Errorf("stream %d: output differs", g)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestEmitsEagerly: after each Write, everything that cannot be part of a
// match is already in dst (so a flush needs only Err, and what server-sent events
// need); only a live candidate is held back.
func TestEmitsEagerly(t *testing.T) {
	s := mustCompile(t, []Rule{rx("abcd|ab", "X"), lit("hello", "bye")}, Options{})
	var buf bytes.Buffer
	st := s.NewStream(&buf, nil)
	steps := []struct{ write, want string }{
		{"data: 1\n\n", "data: 1\n\n"},
		{"xx ab", "data: 1\n\nxx "},     // "ab" may grow into "abcd"
		{"c", "data: 1\n\nxx "},         // "abc" still may
		{"e", "data: 1\n\nxx Xce"},      // it did not: "ab" wins
		{"he", "data: 1\n\nxx Xce"},     // may be "hello"
		{"lp", "data: 1\n\nxx Xcehelp"}, // is not
		{"hell", "data: 1\n\nxx Xcehelp"},
	}
	for _, step := range steps {
		if _, err := st.Write([]byte(step.write)); err != nil {
			t.Fatal(err)
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if buf.String() != step.want {
			t.Fatalf("after writing %q: dst has %q, want %q", step.write, buf.String(), step.want)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if want := "data: 1\n\nxx Xcehelphell"; buf.String() != want {
		t.Fatalf("after Close: %q, want %q", buf.String(), want)
	}
}

// TestHostileBodies: on the bodies of BenchmarkWorstCase (shortened), the
// memo path changes nothing: same output and drops as plain anchored
// attempts, in any chunking, and the reference's output when nothing is
// dropped.
func TestHostileBodies(t *testing.T) {
	cases := hostileCases()
	cases = append(cases, hostileCase{"tags closed", []Rule{rx(`<a [^>]*>`, "T"), lit("<a", "L")}, []byte(strings.Repeat("<a ", 1000) + ">" + strings.Repeat("<a ", 500))})
	// Under the race detector (ten times slower) shorter bodies and fewer
	// chunkings; CI runs the whole test again without it.
	size, chunkings, maxMatches := 6000, [][]int{nil, {1}, {7, 13}, {4096}}, []int{64, 1000, DefaultMaxMatch}
	if raceEnabled {
		size, chunkings, maxMatches = 1500, [][]int{nil, {7, 13}}, []int{64, DefaultMaxMatch}
	}
	for _, hc := range cases {
		body := hc.body[:min(len(hc.body), size)]
		if hc.name == "tags closed" {
			body = hc.body
		}
		for _, maxMatch := range maxMatches {
			s := mustCompile(t, hc.rules, Options{MaxMatch: maxMatch})
			want, plain, err := runNoMemo(s, nil, body, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, chunks := range chunkings {
				got, st, err := runGuard(s, guardNever, nil, body, chunks)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) || st.Dropped() != plain.Dropped() {
					t.Fatalf("%s max_match %d chunks %v: output or drops (%d, want %d) differ from plain attempts", hc.name, maxMatch, chunks, st.Dropped(), plain.Dropped())
				}
				for _, mode := range []guardMode{guardAuto, guardAlways} {
					if got, _, err := runGuard(s, mode, nil, body, chunks); err != nil || !bytes.Equal(got, want) {
						t.Fatalf("%s max_match %d chunks %v guard mode %d: output differs from plain attempts (%v)", hc.name, maxMatch, chunks, mode, err)
					}
				}
			}
			if plain.Dropped() == 0 {
				if ref := reference(hc.rules, Longest, nil, body); !bytes.Equal(want, ref) {
					t.Fatalf("%s max_match %d: output differs from the reference", hc.name, maxMatch)
				}
			}
			// Every "<a " more than max_match bytes from the end is dropped.
			drops := 0
			if last := len(body) - maxMatch - 1; last >= 0 {
				drops = last/3 + 1
			}
			switch {
			case hc.name == "tags" && (!bytes.Equal(want, body) || plain.Dropped() != drops):
				t.Fatalf("tags max_match %d: want the body unchanged and %d drops, got %d", maxMatch, drops, plain.Dropped())
			case hc.name == "tags closed" && maxMatch == DefaultMaxMatch && string(want) != "T"+strings.Repeat("L ", 500):
				t.Fatalf("tags closed: got %.40q...", want)
			}
		}
	}
}

// TestMemoAgainstPlainAttempts: on longer random bodies full of candidates
// (so attempts overlap, join the memo path and wrap its ring), with small
// max_match values (so drops abound, which the reference does not cover) and
// now and then a DFA cache that keeps resetting, the memo changes neither
// the output nor the drops of plain anchored attempts, in any chunking.
func TestMemoAgainstPlainAttempts(t *testing.T) {
	iters := 2000
	if testing.Short() || raceEnabled {
		iters = 200
	}
	rng := rand.New(rand.NewPCG(7, 9))
	alpha := []string{"a", "b", "<a ", "aa", " ", "\n", "é", ">", "ab"}
	for it := range iters {
		rules := randRules(rng)
		prio := Priority(rng.IntN(2))
		var in []byte
		for range rng.IntN(600) {
			in = append(in, alpha[rng.IntN(len(alpha))]...)
		}
		cache := 0
		if rng.IntN(4) == 0 {
			cache = 1 << 16
		}
		s, err := Compile(rules, Options{Priority: prio, MaxMatch: 1 + rng.IntN(300), CacheSize: cache})
		if err != nil {
			continue // too large for the tiny cache
		}
		s.memoShape.ring = 1 << rng.IntN(8)
		s.memoShape.stride = 1 << rng.IntN(7)
		s.memoShape.slots = s.maxMatch/s.memoShape.stride + 2
		for _, chunks := range [][]int{nil, {1}, {1 + rng.IntN(50), 1 + rng.IntN(9)}} {
			want, plain, err := runNoMemo(s, randVars, in, chunks)
			if err != nil {
				t.Fatal(err)
			}
			got, st, err := runGuard(s, guardNever, randVars, in, chunks)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || st.Dropped() != plain.Dropped() {
				t.Fatalf("#%d rules %+v prio %d max %d ring %d input %q chunks %v:\n got %q (%d dropped)\nwant %q (%d dropped)", it, rules, prio, s.maxMatch, s.memoShape.ring, in, chunks, got, st.Dropped(), want, plain.Dropped())
			}
			if got, _, err := runGuard(s, guardAlways, randVars, in, chunks); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("#%d rules %+v prio %d max %d input %q chunks %v: guarded output %q, want %q (%v)", it, rules, prio, s.maxMatch, in, chunks, got, want, err)
			}
		}
	}
}

// TestAnchorHashes: the scan hashes all the triples of an eight-byte word
// with one shift and one xor; each must equal the anchor table's own hash,
// or the scan would test the wrong entries and miss matches.
func TestAnchorHashes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 10000 {
		w := rng.Uint64()
		h := anchorHashes(w)
		for i := range 6 {
			if got, want := uint16(h>>(8*i))&anchorMask, anchorHash(uint32(w>>(8*i))); got != want {
				t.Fatalf("word %#x, triple %d: anchorHashes gives %#x, anchorHash %#x", w, i, got, want)
			}
		}
	}
}

// TestAnchorOffsets: the anchor table records at which offsets of a match
// each triple occurs, so that a hit tests only the starts those offsets
// give; a match is found at every alignment of the scan.
func TestAnchorOffsets(t *testing.T) {
	s := mustCompile(t, []Rule{lit("rustc", "R")}, Options{})
	if s.pre.stride != 3 {
		t.Fatalf("stride %d, want 3", s.pre.stride)
	}
	for off, tri := range []string{"rus", "ust", "stc"} {
		x := uint32(tri[0]) | uint32(tri[1])<<8 | uint32(tri[2])<<16
		if got, want := s.pre.anchors[anchorHash(x)], uint8(1)<<(2-off); got != want {
			t.Errorf("triple %q (offset %d): anchor mask %03b, want %03b", tri, off, got, want)
		}
	}
	for pad := range 40 {
		body := []byte(strings.Repeat("u", pad) + "rustc" + strings.Repeat("t", 40))
		if got := s.pre.next(body, 0); got != pad {
			t.Errorf("rustc after %d bytes: first candidate %d", pad, got)
		}
	}
}

// TestLiteralShortcut: a literal whose first three bytes leave no other
// rule alive is compared with the text in one go instead of run through the
// DFA; the output is the reference's whatever the chunks, max_match, once
// rules and priority.
func TestLiteralShortcut(t *testing.T) {
	once := lit("rustc", "R")
	once.Once = true
	sets := []struct {
		rules []Rule
		owned []string // the literals the shortcut applies to
	}{
		// Shared beginnings: another literal, a regex.
		{[]Rule{lit("rustc", "R"), lit("rust-lang", "L"), rx(`ca[a-z]+`, "X"), lit("cargo", "C")}, nil},
		// Another rule matching at the same start: a shorter match (\bab),
		// one of the same three bytes waiting on a word boundary (rus\b).
		{[]Rule{lit("rustc", "R"), lit("abcd", "A"), rx(`\bab`, "X")}, []string{"rustc"}},
		{[]Rule{lit("rustc", "R"), rx(`rus\b`, "X"), lit("xyz", "Z")}, []string{"xyz"}},
		{[]Rule{once, lit("cargo", "C"), lit("rust-lang", "L")}, []string{"cargo"}},
		{[]Rule{once, lit("cargo", "C")}, []string{"rustc", "cargo"}},
	}
	rng := rand.New(rand.NewPCG(7, 8))
	iters := 200
	if testing.Short() || raceEnabled {
		iters = 40
	}
	pieces := []string{"rust", "rustc", "rus", "c", " ", "ab", "abcd", "xyz", "carg", "cargo", "-lang", "\n"}
	for _, set := range sets {
		s := mustCompile(t, set.rules, Options{})
		var owned []string
		for _, r := range s.pre.litOwner {
			if r >= 0 {
				owned = append(owned, s.rules[r].Pattern)
			}
		}
		slices.Sort(owned)
		slices.Sort(set.owned)
		if !slices.Equal(owned, set.owned) {
			t.Errorf("rules %+v: shortcut for %q, want %q", set.rules, owned, set.owned)
		}
		for it := range iters {
			var input []byte
			for range rng.IntN(40) {
				input = append(input, pieces[rng.IntN(len(pieces))]...)
			}
			checkOne(t, set.rules, Priority(rng.IntN(2)), input, rng, it)
		}
	}
}

// TestAnchorStrides: rule sets whose matches are all 4 or 5+ bytes long scan
// one position in 2 or 3 (unless their classes are too wide); matches at
// every alignment, at chunk edges and at the end of the body are still found.
func TestAnchorStrides(t *testing.T) {
	sets := []struct {
		stride int
		rules  []Rule
	}{
		{2, []Rule{lit("abba", "X"), rx(`b[ab]{3}`, "<$0>")}},
		{3, []Rule{lit("aabab", "X"), rx(`\bbaaa+b\b`, "Y"), rx(`(ab){3,}`, "[$1]")}},
		{3, []Rule{rx(`(?i)a[b ]{3}a`, "Z"), lit("bbbbbbbb", "W")}},
		// A wide class allows too many triples: no anchors.
		{1, []Rule{rx(`a[^a]{3}a`, "Z"), lit("bbbbbbbb", "W")}},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	iters := 300
	if testing.Short() || raceEnabled {
		iters = 60
	}
	for _, set := range sets {
		s := mustCompile(t, set.rules, Options{})
		if s.pre.stride != set.stride {
			t.Fatalf("rules %+v: stride %d, want %d", set.rules, s.pre.stride, set.stride)
		}
		for it := range iters {
			var input []byte
			for range rng.IntN(120) {
				input = append(input, "aab b"[rng.IntN(5)])
			}
			checkOne(t, set.rules, Priority(rng.IntN(2)), input, rng, it)
		}
	}
}

// TestLitRuns: the backtracker compares chains of single-byte instructions
// at once; a chain ends where another edge enters it.
func TestLitRuns(t *testing.T) {
	re, err := syntax.Parse(`https?://github\.com/([\w-]+)`, syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := newCapProg(re)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range cp.runs {
		if r.lit != nil {
			got = append(got, string(r.lit))
		}
	}
	slices.Sort(got)
	if want := []string{"://github.com/", "http"}; !slices.Equal(got, want) {
		t.Errorf("literal runs %q, want %q", got, want)
	}
}

// TestBacktrackAgreesWithPike: the backtracker (short matches) and the Pike
// VM (long ones) give the groups Go's regexp gives, with the bytes around
// the match as context for assertions.
func TestBacktrackAgreesWithPike(t *testing.T) {
	patterns := []string{
		`(a|ab)(c|bcd)(d*)`, `(a+)(b+)?`, `\b(\w+)\b`, `(?i)(é+)(.)`, `(a+?)(a*)`,
		`(?:(a)|(b))+`, `^(a)|(b)$`, `(?m)^(\w+)$`, `(x?)\B(y)`, `((a)|b)+`,
		// Literal runs, whole, looped, alternated and cut by captures.
		`(abab)+(ab)?`, `a(bcd|bc)+(d*)`, `(?:ab|ac)(dab)(a|b)`, `(ab(c))d`,
	}
	rng := rand.New(rand.NewPCG(5, 6))
	iters := 60
	if testing.Short() || raceEnabled {
		iters = 15
	}
	checked, long := 0, 0
	for _, pat := range patterns {
		re, err := syntax.Parse(pat, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := newCapProg(re)
		if err != nil {
			t.Fatal(err)
		}
		goRE := regexp.MustCompile(pat)
		for range iters {
			var text []byte
			for range rng.IntN(30) {
				piece := []string{"a", "b", "c", "d", "é", "x", "y", " ", "\n", "ab"}[rng.IntN(10)]
				if rng.IntN(20) == 0 { // a run long enough for the Pike VM
					piece = strings.Repeat(piece, 20_000)
				}
				text = append(text, piece...)
			}
			for _, want := range goRE.FindAllSubmatchIndex(text, -1) {
				s, e := want[0], want[1]
				if s == e {
					continue
				}
				prev, next := -1, -1
				if s > 0 {
					prev = int(text[s-1])
				}
				if e < len(text) {
					next = int(text[e])
				}
				checked++
				if len(cp.prog.Inst)*(e-s+1) > maxBacktrackBits {
					long++
				}
				m := cp.machine()
				bt, pk := make([]int, cp.ncap), make([]int, cp.ncap)
				for i := range m.cap {
					m.cap[i] = -1
				}
				okB := m.backtrack(bt, text[s:e], prev, next)
				for i := range m.cap {
					m.cap[i] = -1
				}
				okP := m.pike(pk, text[s:e], prev, next)
				for i := range want {
					if want[i] >= 0 {
						want[i] -= s
					}
				}
				if !okB || !okP || !slices.Equal(bt, want) || !slices.Equal(pk, want) {
					t.Fatalf("%s on %q in %q: backtrack %v %v, pike %v %v, regexp %v", pat, text[s:e], text, okB, bt, okP, pk, want)
				}
			}
		}
	}
	t.Logf("%d matches, %d long", checked, long)
	if checked < 1000 || long < 5 {
		t.Fatalf("only %d matches (%d long): the test checks too little", checked, long)
	}
}
