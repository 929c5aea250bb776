//go:build !purego

package engine

import "golang.org/x/sys/cpu"

// useTeddy: the CPU runs teddyAVX2. (Tests compare the two scans by
// clearing a Set's teddy field instead.)
var useTeddy = cpu.X86.HasAVX2

// teddyScan is teddyScanGo, 32 positions per step.
func teddyScan(m *teddyMasks, buf []byte) (i int, mask uint32) { return teddyAVX2(m, buf) }

//go:noescape
func teddyAVX2(m *teddyMasks, buf []byte) (i int, mask uint32)
