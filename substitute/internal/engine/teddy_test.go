package engine

import (
	"math/bits"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// teddyPositions collects the positions a Teddy scan passes from start,
// resuming after each block as candidate does, and where it stopped.
func teddyPositions(scan func(*teddyMasks, []byte) (int, uint32), m *teddyMasks, buf []byte, start int) (pos []int, stop int) {
	i := start
	for {
		r, mask := scan(m, buf[i:])
		if i += r; mask == 0 {
			return pos, i
		}
		for ; mask != 0; mask &= mask - 1 {
			pos = append(pos, i+bits.TrailingZeros32(mask))
		}
		i += 32
	}
}

// TestTeddyScan: the vector scan passes the same positions as the Go loop,
// from every start, over random tables and bodies, and stops where it
// does (37 bytes from the end of a block).
func TestTeddyScan(t *testing.T) {
	if !useTeddy {
		t.Skip("no vector Teddy on this CPU or build (purego)")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	passed := 0
	for it := range 300 {
		var m teddyMasks
		for r := range 6 {
			for n := range 16 {
				v := byte(rng.Uint32() & rng.Uint32()) // sparse buckets
				if it%3 == 0 {
					v = byte(rng.Uint32() | rng.Uint32()) // dense
				}
				m[r][n], m[r][n+16] = v, v
			}
		}
		body := make([]byte, rng.IntN(300))
		for i := range body {
			if it%2 == 0 {
				body[i] = byte(rng.Uint32()) // every nibble
			} else {
				body[i] = "ab\x00\xff"[rng.IntN(4)]
			}
		}
		for start := range len(body) + 1 {
			got, gstop := teddyPositions(teddyScan, &m, body, start)
			want, wstop := teddyPositions(teddyScanGo, &m, body, start)
			if !slices.Equal(got, want) || gstop != wstop {
				t.Fatalf("#%d from %d: vector passes %v (stops at %d), Go %v (stops at %d)", it, start, got, gstop, want, wstop)
			}
			passed += len(got)
			for _, j := range got {
				if m.buckets(body[j], body[j+1], body[j+2]) == 0 || j+3 >= len(body) {
					t.Fatalf("#%d: position %d passed", it, j)
				}
			}
		}
	}
	if passed < 100_000 {
		t.Fatalf("only %d positions passed: the tables test too little", passed)
	}
}

// TestTeddyKeepsEveryStart: every triple that can begin a match (checked
// by running the DFA over it) is in some bucket, for rule sets with one
// bucket per group of triples and with groups merged into eight buckets.
func TestTeddyKeepsEveryStart(t *testing.T) {
	sets := map[string][]Rule{
		"wrk":       wrkRules(),
		"bench 10":  benchRules(10),
		"bench 200": benchRules(200), // merged
		"classes":   {rx(`(?i)straße`, "S"), rx(`\bv\d+\.\d`, "V"), rx(`[α-ω]{2}x`, "G"), lit("abc", "A")},
	}
	for name, rules := range sets {
		s := mustCompile(t, rules, Options{})
		if s.pre.teddy == nil {
			t.Fatalf("%s: no Teddy", name)
		}
		n := 0
		for b0 := range 256 {
			if !s.pre.first[b0] {
				continue
			}
			for b1 := range 256 {
				for b2 := range 256 {
					if !canBegin(s, byte(b0), byte(b1), byte(b2)) {
						continue
					}
					n++
					if s.pre.teddy.buckets(byte(b0), byte(b1), byte(b2)) == 0 {
						t.Fatalf("%s: triple %q can begin a match, and is in no bucket", name, []byte{byte(b0), byte(b1), byte(b2)})
					}
				}
			}
		}
		if n == 0 {
			t.Fatalf("%s: no triple can begin a match", name)
		}
	}
}

// canBegin reports whether some start state survives b0 b1 b2 (or matches
// after b0 b1).
func canBegin(s *Set, b0, b1, b2 byte) bool {
	d := s.dfa
	for _, st := range s.full {
		t1 := d.next(st, int(s.classes[b0]))
		if len(t1.pcs) == 0 {
			continue
		}
		t2 := d.next(t1, int(s.classes[b1]))
		if t2.alive() && (t2.match >= 0 || d.next(t2, int(s.classes[b2])).alive()) {
			return true
		}
	}
	return false
}

// TestTeddyChoice: Teddy is built where its buckets pass few positions of
// a text body, and not where the scalar scan does as well or where it
// would change which attempts are dropped (max_match 1).
func TestTeddyChoice(t *testing.T) {
	data, err := os.ReadFile("testdata/rustc-book.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		rules []Rule
		opts  Options
		want  bool
	}{
		{"wrk rules", wrkRules(), Options{}, true},
		{"one literal", []Rule{lit("rustc", "R")}, Options{}, true},
		{"words", []Rule{rx(`\w+@\w+`, "E")}, Options{}, false},
		{"any byte first", []Rule{rx(`(?s).ab`, "X")}, Options{}, false},
		{"max_match 1", []Rule{lit("a", "b")}, Options{MaxMatch: 1}, false},
	} {
		s := mustCompile(t, c.rules, c.opts)
		if got := s.pre.teddy != nil; got != c.want {
			t.Errorf("%s: Teddy %v, want %v", c.name, got, c.want)
		}
		if s.pre.teddy == nil {
			continue
		}
		// On the HTML page, within a few times the estimate.
		passed := 0
		for i := 0; i+2 < len(data); i++ {
			if s.pre.teddy.buckets(data[i], data[i+1], data[i+2]) != 0 {
				passed++
			}
		}
		if share := float64(passed) / float64(len(data)); share > 3*teddyMaxPass {
			t.Errorf("%s: Teddy passes %.2f%% of the page", c.name, 100*share)
		}
	}
}
