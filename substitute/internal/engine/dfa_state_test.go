package engine

import "testing"

// TestStateTransitionsInline: for every transition count newState serves,
// state.to reads the same slots as state.next, where newState put them.
func TestStateTransitionsInline(t *testing.T) {
	other := newState(1)
	for n := 1; n <= 257; n++ {
		s := newState(n)
		if len(s.next) != n {
			t.Fatalf("newState(%d): %d transitions", n, len(s.next))
		}
		for c := range n {
			if s.to(c) != nil {
				t.Fatalf("newState(%d): transition %d set", n, c)
			}
			s.next[c].Store(other)
			if s.to(c) != other {
				t.Fatalf("newState(%d): to(%d) does not read next[%d]", n, c, c)
			}
			s.next[c].Store(nil)
		}
	}
}

// TestPrevClassAgreesWithFlags: the start state after any byte has the
// context a state reached by that byte has (flagsAfter), and no byte
// before is the start of the body.
func TestPrevClassAgreesWithFlags(t *testing.T) {
	if f := startFlags[prevClass(-1)]; f != flagStart {
		t.Fatalf("prevClass(-1): flags %b, want flagStart", f)
	}
	for b := range 256 {
		if got, want := startFlags[prevClass(b)], flagsAfter(byte(b)); got != want {
			t.Fatalf("prevClass(%q): flags %b, want %b", byte(b), got, want)
		}
	}
}
