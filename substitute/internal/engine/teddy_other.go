//go:build !amd64 || purego

package engine

// useTeddy is false where there is no vector code: one position at a time,
// Teddy would be slower than the scalar scan.
var useTeddy = false

func teddyScan(m *teddyMasks, buf []byte) (i int, mask uint32) { return teddyScanGo(m, buf) }
