package engine

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// guardAlpha: pieces of random bodies, so that candidates abound and
// repeats run long.
var guardAlpha = []string{"a", "b", "a", "aa", "ab", " ", "\n", "é", "ä", "x", "<a "}

// TestGuardScansFindEveryMatch: the guard's invariant, on its own. Run over
// a whole body, its forward scan records exactly the positions where a
// match of some rule ends, and its backward scan exactly those where one
// starts, as Go's regexp finds them trying every span; in segments (a small
// ring) as in one go.
func TestGuardScansFindEveryMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 1))
	iters := 200
	if testing.Short() || raceEnabled {
		iters = 40
	}
	for it := range iters {
		rules := randRules(rng)
		var body []byte
		for range rng.IntN(50) {
			body = append(body, guardAlpha[rng.IntN(len(guardAlpha))]...)
		}
		if !utf8.Valid(body) {
			continue
		}
		starts, ends := spanMatches(rules, body)
		for _, ring := range []int{0, 16} {
			s := mustCompile(t, rules, Options{MaxMatch: 1 << 10})
			s.guardRing = ring
			a := s.guardAutomata()
			g := new(guard)
			g.restart(a, 0, 0)
			for j := 0; !g.done; j = min(j+1+rng.IntN(8), len(body)) {
				g.cover(s, body, j, -1, true, 0)
				for p := int64(0); p <= g.top; p++ {
					if p < int64(j) {
						continue // below the scans' low end: not kept
					}
					// Marked: a match ending at or before top starts here.
					if got, want := g.bit(g.marks, p), starts[p] >= 0 && starts[p] <= g.top; got != want {
						t.Fatalf("#%d rules %+v body %q ring %d: mark at %d is %v, want %v", it, rules, body, a.ring, p, got, want)
					}
					if got, want := g.bit(g.ends, p), ends[p]; got != want && p >= int64(j) {
						t.Fatalf("#%d rules %+v body %q ring %d: end at %d is %v, want %v", it, rules, body, a.ring, p, got, want)
					}
				}
			}
		}
	}
}

// spanMatches tries every rule on every span [j, e) of a valid UTF-8 body
// with Go's regexp, in context (the rune before and after), and returns
// where matches end and, for each position, the first end of a match that
// starts there (-1: none).
func spanMatches(rules []Rule, body []byte) (starts []int64, ends []bool) {
	starts, ends = make([]int64, len(body)+1), make([]bool, len(body)+1)
	for i := range starts {
		starts[i] = -1
	}
	for _, r := range rules {
		spans := refSpans(refPattern(r))
		for j := 0; j < len(body); j++ {
			if !utf8.RuneStart(body[j]) {
				continue
			}
			for e := j + 1; e <= len(body); e++ {
				if e < len(body) && !utf8.RuneStart(body[e]) {
					continue
				}
				v, lo, hi := 0, j, e
				if j > 0 {
					_, n := utf8.DecodeLastRune(body[:j])
					v, lo = v|2, j-n
				}
				if e < len(body) {
					_, n := utf8.DecodeRune(body[e:])
					v, hi = v|1, e+n
				}
				if spans[v].Match(body[lo:hi]) {
					ends[e] = true
					if starts[j] < 0 || int64(e) < starts[j] {
						starts[j] = int64(e)
					}
				}
			}
		}
	}
	return starts, ends
}

// TestGuardAgainstPlainAttempts: the differential test. Random rule sets
// (bounded repeats, anchors, classes, literals, Once), random bodies full of
// candidates and random chunkings: with the guard on from the first byte,
// with a small ring (scans in many segments) or the default one, and now
// and then a crossed window smaller than the ring (guard.cut), the output
// is that of plain anchored attempts, and the reference's when nothing was
// dropped.
func TestGuardAgainstPlainAttempts(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 2))
	iters := 3000
	if testing.Short() || raceEnabled {
		iters = 300
	}
	for it := range iters {
		rules := randRules(rng)
		prio := Priority(rng.IntN(2))
		var in []byte
		for range rng.IntN(400) {
			in = append(in, guardAlpha[rng.IntN(len(guardAlpha))]...)
		}
		s, err := Compile(rules, Options{Priority: prio, MaxMatch: 1 + rng.IntN(80)})
		if err != nil {
			continue
		}
		if rng.IntN(2) == 0 {
			s.guardRing = 16
		}
		if rng.IntN(3) == 0 {
			s.guardCrossed = 64 // a crossed window below the ring
		}
		want, plain, err := runNoMemo(s, randVars, in, nil)
		if err != nil {
			t.Fatal(err)
		}
		if plain.Dropped() == 0 && utf8.Valid(in) {
			if ref := reference(rules, prio, randVars, in); !bytes.Equal(want, ref) {
				t.Fatalf("#%d rules %+v prio %d input %q: plain %q, reference %q", it, rules, prio, in, want, ref)
			}
		}
		for _, chunks := range [][]int{nil, {1}, {1 + rng.IntN(30), 1 + rng.IntN(5)}} {
			got, _, err := runGuard(s, guardAlways, randVars, in, chunks)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("#%d rules %+v prio %d max %d ring %d input %q chunks %v:\n got %q\nwant %q", it, rules, prio, s.maxMatch, s.guardA.ring, in, chunks, got, want)
			}
		}
	}
}

// TestGuardTurnsOnOnlyWhenAttemptsReadTooMuch: on the sample pages, with
// every benchmark rule set, the guard never turns on (their figures are
// those of plain attempts); on a hostile body it does.
func TestGuardTurnsOnOnlyWhenAttemptsReadTooMuch(t *testing.T) {
	sets := map[string][]Rule{"wrk": wrkRules(), "10": benchRules(10), "200": benchRules(200)}
	for _, body := range benchBodies {
		data, err := os.ReadFile(body.file)
		if err != nil {
			t.Fatal(err)
		}
		for name, rules := range sets {
			st := mustCompile(t, rules, Options{}).NewStream(io.Discard, nil)
			streamOnce(st, data)
			if st.guard != nil {
				t.Errorf("%s, rules %s: the guard turned on", body.name, name)
			}
		}
	}
	st := mustCompile(t, []Rule{rx(`a{1,1000}b`, "")}, Options{}).NewStream(io.Discard, nil)
	streamOnce(st, []byte(strings.Repeat("a", 256<<10)))
	if st.guard == nil || !st.guard.on {
		t.Error("a{1,1000}b over a run of a: the guard stayed off")
	}
}

// TestGuardCoveredSkipsOnlyANoOpCover: guard.covered, the inlined test that
// lets a guarded candidate skip its call of cover, says yes only where cover
// has nothing to do (the scans stay where they are and cover says yes), and
// says yes wherever cover just succeeded.
func TestGuardCoveredSkipsOnlyANoOpCover(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 2))
	for it := range 100 {
		rules := randRules(rng)
		var body []byte
		for range rng.IntN(200) {
			body = append(body, guardAlpha[rng.IntN(len(guardAlpha))]...)
		}
		s := mustCompile(t, rules, Options{MaxMatch: 16 + rng.IntN(64)})
		s.guardRing = 128
		a := s.guardAutomata()
		g := new(guard)
		g.restart(a, 0, 0)
		final := rng.IntN(2) == 0
		for j := 0; j < len(body); j += 1 + rng.IntN(8) {
			if g.covered(a.reach, int64(j)) {
				top, u, done := g.top, g.uPos, g.done
				if !g.cover(s, body, j, -1, final, 0) || g.top != top || g.uPos != u || g.done != done {
					t.Fatalf("#%d rules %+v body %q: covered at %d, but cover moved the scans (top %d to %d)", it, rules, body, j, top, g.top)
				}
			} else if g.cover(s, body, j, -1, final, 0) && !g.covered(a.reach, int64(j)) {
				t.Fatalf("#%d rules %+v body %q: cover at %d succeeded (top %d), covered says no", it, rules, body, j, g.top)
			}
		}
	}
}

// TestGuardDecidedAgreesWithAttempts: wherever guard.decided settles a
// candidate without an attempt, an anchored attempt there (with the
// drops at max_match a stream makes) finds the same match: same end, same
// rule. Random rule sets and bodies, both priorities, now and then a
// small ring (so that the slots of the marks' rules are shared by
// positions of one body); and on the dense body of BenchmarkWorstCase's
// mixed case it decides nearly every match, at max_match 1 KiB and 16 KiB.
func TestGuardDecidedAgreesWithAttempts(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 3))
	iters := 1500
	if testing.Short() || raceEnabled {
		iters = 150
	}
	decided := 0
	check := func(what string, s *Set, body []byte) int {
		n := 0
		a := s.guardAutomata()
		g := new(guard)
		g.restart(a, 0, 0)
		for j := 0; j < len(body); j++ {
			if !g.cover(s, body, j, -1, true, 0) {
				t.Fatalf("%s: cover at %d failed on a whole body", what, j)
			}
			e1, ok := g.worth(s, int64(j))
			if !ok {
				continue
			}
			e, r, ok := g.decided(s, int64(j), e1)
			if !ok {
				continue
			}
			n++
			if wantLen, wantRule := attemptAt(s, body, j); int(e)-j != wantLen || r != wantRule {
				t.Fatalf("%s: at %d decided a match of %d bytes of rule %d, the attempt %d bytes of rule %d", what, j, int(e)-j, r, wantLen, wantRule)
			}
		}
		return n
	}
	for it := range iters {
		rules := randRules(rng)
		prio := Priority(rng.IntN(2))
		var body []byte
		for range rng.IntN(300) {
			body = append(body, guardAlpha[rng.IntN(len(guardAlpha))]...)
		}
		s, err := Compile(rules, Options{Priority: prio, MaxMatch: 1 + rng.IntN(80)})
		if err != nil {
			continue
		}
		if rng.IntN(2) == 0 {
			s.guardRing = 16
		}
		decided += check(fmt.Sprintf("#%d rules %+v prio %d max %d body %q", it, rules, prio, s.maxMatch, body), s, body)
	}
	if decided == 0 {
		t.Fatal("decided never settled a candidate")
	}
	for _, hc := range hostileCases() {
		if hc.name != "mixed" {
			continue
		}
		body := hc.body[:80000]
		for _, maxMatch := range []int{1 << 10, DefaultMaxMatch} {
			s := mustCompile(t, hc.rules, Options{MaxMatch: maxMatch})
			if n := check("mixed", s, body); n < len(body)/8-maxMatch/8-200 {
				t.Fatalf("mixed max_match %d: decided %d of the %d matches", maxMatch, n, len(body)/8)
			}
		}
	}
}

// attemptAt returns the match an anchored attempt at body[j] finds, with
// every rule active, as a stream does at the end of the body (Stream.drop
// and Stream.settle): its length and rule, or -1 and -1.
func attemptAt(s *Set, body []byte, j int) (int, int32) {
	prev := -1
	if j > 0 {
		prev = int(body[j-1])
	}
	pc := prevClass(prev)
	rest := NewMask(len(s.rules))
	copy(rest, s.all)
	start := s.full[pc]
	for {
		a := attempt{bestLen: -1}
		t, why := s.runPlain(&a, start, body, j, j)
		switch why {
		case runStarved:
			if m := s.dfa.eofMatch(t); m >= 0 {
				return len(body) - j, m
			}
			fallthrough
		case runDead:
			if a.bestLen < 0 {
				return -1, -1
			}
			return a.bestLen, a.bestRule
		}
		for _, p := range t.pcs {
			rest.Remove(int(s.prog.insts[p].rule))
		}
		if rest.Empty() {
			return -1, -1
		}
		start = s.dfa.start(rest, pc, false)
	}
}
