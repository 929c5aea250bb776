package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// sameState reports whether two states are the same DFA state (a cache
// reset may have built one of them anew).
func sameState(a, b *state) bool {
	return a.flags == b.flags && a.match == b.match && slices.Equal(a.pcs, b.pcs)
}

// TestPathMemoJoinKeepsMatchEvents: the path memo's invariant, alone. On
// random rule sets, bodies full of overlapping candidates and memo sizes
// from tiny to the default, attempts at increasing positions (every one,
// or with gaps, as after matches) are run along the path with begin, run
// and resolve, and each must end exactly as the same attempt run alone
// (runPlain): the same best match, the same reason to stop, and an
// equivalent last state (which decides a match at the end of the body and
// which rules a drop removes). Body offsets start at a random base, as in
// the middle of a stream.
func TestPathMemoJoinKeepsMatchEvents(t *testing.T) {
	iters := 1500
	if testing.Short() || raceEnabled {
		iters = 300
	}
	rng := rand.New(rand.NewPCG(16, 4))
	alpha := []string{"a", "b", "<a ", "aa", " ", "\n", "é", ">", "ab", "abab"}
	joined := 0
	for it := range iters {
		rules := randRules(rng)
		if rng.IntN(2) == 0 {
			rules = append(rules, Rule{Pattern: "<a [^>]*>"}, Rule{Pattern: "a{1,20}b"})
		}
		cache := 0
		if rng.IntN(4) == 0 {
			cache = 1 << 16 // resets often
		}
		s, err := Compile(rules, Options{Priority: Priority(rng.IntN(2)), MaxMatch: 1 + rng.IntN(200), CacheSize: cache})
		if err != nil {
			continue // too large for the small cache
		}
		shape := memoShape{ring: 1 << rng.IntN(8), stride: 1 << rng.IntN(7)}
		shape.slots = s.maxMatch/shape.stride + 2
		var body []byte
		for range rng.IntN(400) {
			body = append(body, alpha[rng.IntN(len(alpha))]...)
		}
		delta := int64(rng.IntN(5000))
		m := newPathMemo(shape)
		m.reset()
		gaps := rng.IntN(2) == 0
		for j := 0; j < len(body); j++ {
			if gaps && rng.IntN(3) == 0 {
				j += rng.IntN(6)
				if j >= len(body) {
					break
				}
			}
			prev := -1
			if j > 0 {
				prev = int(body[j-1])
			}
			start := s.full[prevClass(prev)]
			a := attempt{state: start, bestLen: -1}
			m.begin(s, body, 0, j, delta)
			got, k, why := m.run(s, &a, body, j, delta)
			if m.merged {
				joined++
			}
			alone := attempt{bestLen: -1}
			want, wantWhy := s.runPlain(&alone, start, body, j, j)
			if a.bestLen != alone.bestLen || a.bestLen >= 0 && a.bestRule != alone.bestRule || why != wantWhy ||
				why != runDead && !sameState(got, want) {
				t.Fatalf("#%d rules %+v max %d shape %+v body %q, attempt at %d (joined %v):\nalong the path: best %d rule %d, stop %d\nalone:          best %d rule %d, stop %d",
					it, rules, s.maxMatch, shape, body, j, m.merged, a.bestLen, a.bestRule, why, alone.bestLen, alone.bestRule, wantWhy)
			}
			m.resolve(&a, j, k, got, why, delta)
		}
	}
	t.Logf("%d attempts joined the path", joined)
	if joined < iters {
		t.Fatalf("only %d attempts joined the path in %d bodies: the test no longer covers joining", joined, iters)
	}
}
