package fieldvalue

import "testing"

// TestPair: at every length up to past Max, s is b as it was, still after
// the caller's buffer is reused, and the pair costs one allocation up to
// Max, two past it.
func TestPair(t *testing.T) {
	buf := make([]byte, Max+40)
	for n := 0; n <= len(buf); n++ {
		for i := range buf[:n] {
			buf[i] = byte('a' + (i+n)%26)
		}
		want := string(buf[:n])
		vals, s := Pair(buf[:n])
		if s != want || vals[0] != "" || vals[1] != "" {
			t.Fatalf("length %d: %q and %q, want %q and an empty pair", n, s, *vals, want)
		}
		clear(buf)
		if s != want {
			t.Fatalf("length %d: the value changed with the caller's buffer", n)
		}
		wantAllocs := 1.0
		if n > Max {
			wantAllocs = 2
		}
		b := buf[:n]
		if got := testing.AllocsPerRun(10, func() { Pair(b) }); got != wantAllocs && !raceEnabled {
			t.Fatalf("length %d: %v allocations, want %v", n, got, wantAllocs)
		}
	}
}
