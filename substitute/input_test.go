package substitute

import (
	"bytes"
	"slices"
	"testing"
)

// countingWriter records the length of each write it gets.
type countingWriter struct {
	bytes.Buffer
	writes []int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes = append(c.writes, len(p))
	return c.Buffer.Write(p)
}

// TestInputRounds: the engine gets the body in rounds of inRound, nothing
// before a round fills, a full round at once; a write of a round or more with nothing gathered
// goes straight through; feed hands on what is gathered; reset drops it.
func TestInputRounds(t *testing.T) {
	dst := &countingWriter{}
	var in input
	in.reset(dst)
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	for range 3 {
		if _, err := in.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if len(dst.writes) != 0 {
		t.Fatalf("writes %v before a round filled", dst.writes)
	}
	in.Write(chunk) // the round is full: it goes at once, not with the next write
	if want := []int{inRound}; !slices.Equal(dst.writes, want) {
		t.Fatalf("writes %v once the round filled, want %v (a body that fails next would lose it)", dst.writes, want)
	}
	in.Write(chunk)
	if err := in.feed(); err != nil {
		t.Fatal(err)
	}
	in.Write(make([]byte, inRound+1)) // nothing gathered: straight through
	if want := []int{inRound, 32 << 10, inRound + 1}; !slices.Equal(dst.writes, want) {
		t.Errorf("writes %v, want %v", dst.writes, want)
	}
	in.Write([]byte("left over"))
	in.reset(nil)
	if got := dst.Len(); got != 5*(32<<10)+inRound+1 {
		t.Errorf("%d bytes reached the engine: reset handed on what it should drop", got)
	}
}
