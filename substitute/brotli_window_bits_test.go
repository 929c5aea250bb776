package substitute

import "testing"

// TestBrotliWindowBits reads the window of every stream header form (RFC
// 7932 §9.1), including the large-window marker, which is refused.
func TestBrotliWindowBits(t *testing.T) {
	for _, c := range []struct {
		b    byte
		bits int
		ok   bool
	}{
		{0b0000_0000, 16, true},
		{0b0000_0011, 18, true},
		{0b0000_1101, 23, true},
		{0b0000_1111, 24, true},
		{0b0000_0001, 17, true},
		{0b0010_0001, 10, true},
		{0b0111_0001, 15, true},
		{0b0001_0001, 0, false}, // large window (not RFC 7932)
	} {
		if bits, ok := brotliWindowBits(c.b); bits != c.bits || ok != c.ok {
			t.Errorf("%08b: window bits %d, %v; want %d, %v", c.b, bits, ok, c.bits, c.ok)
		}
	}
}
