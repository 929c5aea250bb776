// Package fieldvalue makes a response header field's value in one
// allocation: the bytes of the value's string and the small array of
// strings that header map slices cut, together. string(b) and
// []string{...} would be two allocations; on a per-request path (a
// handler adding its own fields to every response) the second is worth
// saving.
package fieldvalue

import "unsafe"

// Max is the longest b that [Pair] puts in one allocation.
const Max = 480

// Pair returns s, a copy of b as a string, and an array of two strings in
// the same allocation, for the caller to fill with s, parts of s or other
// strings; header map values then cut the array, capped at their length
// (vals[0:1:1]) so an append elsewhere copies it. The allocation is one
// of Go's size classes, at most about 32 bytes more than b, while b fits
// Max; a longer b takes two allocations. Nothing writes the bytes again:
// s is immutable, and it keeps the whole allocation alive, as vals does.
func Pair(b []byte) (vals *[2]string, s string) {
	switch n := len(b); {
	case n <= 48:
		return pairIn[[48]byte](b)
	case n <= 112:
		return pairIn[[112]byte](b)
	case n <= 208:
		return pairIn[[208]byte](b)
	case n <= 224:
		return pairIn[[224]byte](b)
	case n <= 256:
		return pairIn[[256]byte](b)
	case n <= 320:
		return pairIn[[320]byte](b)
	case n <= 352:
		return pairIn[[352]byte](b)
	case n <= Max:
		return pairIn[[Max]byte](b)
	}
	return new([2]string), string(b)
}

// pairIn is Pair with the bytes in an A, a byte array of at least len(b):
// the two strings and A make an object of a size class (32 + len(A)).
func pairIn[A any](b []byte) (*[2]string, string) {
	x := new(struct {
		v [2]string
		b A
	})
	dst := unsafe.Slice((*byte)(unsafe.Pointer(&x.b)), unsafe.Sizeof(x.b))
	return &x.v, unsafe.String(unsafe.SliceData(dst), copy(dst, b))
}
