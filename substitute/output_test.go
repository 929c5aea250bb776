package substitute

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestOutputWritesStringsWithoutAllocating: the engine writes every
// replacement with io.WriteString; through output's WriteString that
// copies into the buffer, where a Writer alone made a []byte of each.
func TestOutputWritesStringsWithoutAllocating(t *testing.T) {
	var o output
	o.reset(io.Discard)
	if n := testing.AllocsPerRun(100, func() {
		_, _ = io.WriteString(&o, "https://git.example.com/rust-lang")
	}); n != 0 && !raceEnabled {
		t.Errorf("io.WriteString to output: %v allocations, want 0", n)
	}
}

// TestOutputStringsAndBytesInOrder: strings and byte slices, across the
// switch to the big buffer, arrive whole and in order.
func TestOutputStringsAndBytesInOrder(t *testing.T) {
	var dst, want bytes.Buffer
	var o output
	o.reset(&dst)
	piece := strings.Repeat("0123456789abcdef", 1000) // 16000 bytes
	for i := 0; dst.Len()+o.buf().Buffered() < 2*outGrowAfter; i++ {
		s := piece[:1+i*997%len(piece)]
		if i%2 == 0 {
			_, _ = io.WriteString(&o, s)
		} else {
			_, _ = o.Write([]byte(s))
		}
		want.WriteString(s)
	}
	if o.big == nil {
		t.Fatal("the big buffer was never taken")
	}
	if err := o.end(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst.Bytes(), want.Bytes()) {
		t.Errorf("output wrote %d bytes, want %d (or the same length, other bytes)", dst.Len(), want.Len())
	}
	o.reset(nil)
}
