package engine

import (
	"math/rand/v2"
	"os"
	"testing"
)

// couldStart is the prefilter's oracle: whether the DFA, started at buf[j]
// with every rule in the context of the byte before, would match or would
// still be alive where buf ends (the next Write could complete a match).
func couldStart(s *Set, buf []byte, j int) bool {
	prev := -1
	if j > 0 {
		prev = int(buf[j-1])
	}
	t := s.full[prevClass(prev)]
	for k := j; k < len(buf); k++ {
		if t = s.step(t, buf[k]); t.match >= 0 {
			return true
		}
		if len(t.pcs) == 0 {
			return false
		}
	}
	return true
}

// checkNeverSkips asserts the prefilter's invariant on buf: from every i,
// next returns a position in [i, len(buf)] and no position before it from
// which the DFA could start a match. It returns how many starts it saw.
func checkNeverSkips(t *testing.T, s *Set, buf []byte, what string) int {
	t.Helper()
	// first[i]: the first position >= i where a match could start.
	first := make([]int, len(buf)+1)
	first[len(buf)] = len(buf)
	starts := 0
	for i := len(buf) - 1; i >= 0; i-- {
		first[i] = first[i+1]
		if couldStart(s, buf, i) {
			first[i] = i
			starts++
		}
	}
	for i := range len(buf) + 1 {
		j := s.pre.next(buf, i)
		if j < i || j > len(buf) {
			t.Fatalf("%s: next(buf, %d) = %d, outside [%d, %d]", what, i, j, i, len(buf))
		}
		if j > first[i] {
			t.Fatalf("%s: next(buf, %d) = %d skips a start at %d (%q)\nrules %+v\nbody %q",
				what, i, j, first[i], buf[first[i]:min(first[i]+12, len(buf))], s.rules, buf)
		}
	}
	return starts
}

// prefilterVariants checks s as built, then with the scalar stages in
// place of Teddy, then with the pair and triple tables alone (stride 1),
// so that each stage is checked whatever the CPU.
func prefilterVariants(t *testing.T, s *Set, bodies [][]byte, what string) {
	t.Helper()
	pre := *s.pre
	defer func() { *s.pre = pre }()
	for v, name := range []string{"as built", "scalar", "pairs only"} {
		switch v {
		case 1:
			s.pre.teddy = nil
		case 2:
			s.pre.stride = 1
		}
		for _, b := range bodies {
			checkNeverSkips(t, s, b, what+" ("+name+")")
		}
	}
}

// TestPrefilterNeverSkipsAStart: the prefilter's invariant, on random rule
// sets over bodies made of their own pieces, whole and cut at random (a
// Write ends anywhere), with every stage.
func TestPrefilterNeverSkipsAStart(t *testing.T) {
	iters := 1500
	if testing.Short() || raceEnabled {
		iters = 150
	}
	rng := rand.New(rand.NewPCG(16, 1))
	alpha := []string{"a", "b", "ab", " ", "\n", "é", "ä", "Ä", "x", "<a ", ">", "aaaa", "abab"}
	for range iters {
		rules := randRules(rng)
		s, err := Compile(rules, Options{Priority: Priority(rng.IntN(2)), MaxMatch: 1 + rng.IntN(64)})
		if err != nil {
			t.Fatal(err)
		}
		var body []byte
		for range rng.IntN(120) {
			if rng.IntN(5) == 0 {
				r := rules[rng.IntN(len(rules))]
				if r.Literal {
					body = append(body, r.Pattern...)
					continue
				}
			}
			body = append(body, alpha[rng.IntN(len(alpha))]...)
		}
		cut := body[:rng.IntN(len(body)+1)]
		prefilterVariants(t, s, [][]byte{body, cut}, "random set")
	}
}

// longRules returns 1 to 4 rules whose matches are 4 bytes or longer, so
// that the set has anchors (stride 2 or 3) more often than randRules'.
func longRules(rng *rand.Rand) []Rule {
	pieces := []string{"a", "b", "ab", "[ab]", "(?i:a)", "é", `\w`, "[^a]", "x?", "b+", " ", "(a|bb)"}
	var rules []Rule
	for range 1 + rng.IntN(4) {
		if rng.IntN(3) == 0 {
			n := 4 + rng.IntN(6)
			lit := make([]byte, n)
			for i := range lit {
				lit[i] = "ab x"[rng.IntN(4)]
			}
			rules = append(rules, Rule{Pattern: string(lit), Literal: true})
			continue
		}
		var p string
		for range 4 + rng.IntN(4) {
			p += pieces[rng.IntN(len(pieces))]
		}
		rules = append(rules, Rule{Pattern: p})
	}
	return rules
}

// TestPrefilterNeverSkipsAStartWithAnchors: the invariant with rules long
// enough for the anchor stage.
func TestPrefilterNeverSkipsAStartWithAnchors(t *testing.T) {
	iters := 1500
	if testing.Short() || raceEnabled {
		iters = 150
	}
	rng := rand.New(rand.NewPCG(16, 3))
	anchored := 0
	for range iters {
		s, err := Compile(longRules(rng), Options{Priority: Priority(rng.IntN(2)), MaxMatch: 4 + rng.IntN(64)})
		if err != nil {
			t.Fatal(err)
		}
		if s.pre.stride > 1 {
			anchored++
		}
		var body []byte
		for range rng.IntN(200) {
			body = append(body, "ab xé\n"[rng.IntN(7)])
		}
		cut := body[:rng.IntN(len(body)+1)]
		prefilterVariants(t, s, [][]byte{body, cut}, "long rules")
	}
	if anchored < iters/4 {
		t.Fatalf("only %d of %d sets have anchors: the test no longer covers that stage", anchored, iters)
	}
}

// TestPrefilterNeverSkipsAStartOnHTML: the same on the benchmark's rule
// sets (which build anchors and Teddy) over slices of the HTML sample that
// end anywhere.
func TestPrefilterNeverSkipsAStartOnHTML(t *testing.T) {
	page, err := os.ReadFile("testdata/rustc-book.html")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(16, 2))
	for _, c := range []struct {
		name  string
		rules []Rule
	}{{"wrk rules", wrkRules()}, {"100 rules", benchRules(100)}, {"literals", []Rule{lit("rustc", "R"), lit("<table>", "T"), lit("https://llvm.org", "L")}}} {
		s := mustCompile(t, c.rules, Options{})
		var bodies [][]byte
		for range 20 {
			i := rng.IntN(len(page) - 4096)
			bodies = append(bodies, page[i:i+1+rng.IntN(4096)])
		}
		prefilterVariants(t, s, bodies, c.name)
	}
}
