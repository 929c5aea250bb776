package engine

import (
	"fmt"
	"os"
	"testing"
)

func TestPrefilterStats(t *testing.T) {
	data, _ := os.ReadFile("testdata/rustc-book.html")
	for _, n := range []int{1, 10, 200} {
		s := mustCompile(t, benchRules(n), Options{})
		pairs, trip, cand := 0, 0, 0
		ent := 0
		for _, v := range s.pair {
			ent += int(v)
		}
		tent := 0
		for _, v := range s.triple {
			tent += int(v)
		}
		for i := 0; i+2 < len(data); i++ {
			if s.pair[uint16(data[i])|uint16(data[i+1])<<8] != 0 {
				pairs++
			}
			if s.triple[tripleHash(uint32(data[i])|uint32(data[i+1])<<8|uint32(data[i+2])<<16)] != 0 {
				trip++
			}
		}
		for i := 0; ; i++ {
			i = s.candidate(data, i, true)
			if i >= len(data) {
				break
			}
			cand++
		}
		t.Logf("rules=%d pairEntries=%d tripleEntries=%d pairHits=%d tripleHits=%d candidates=%d", n, ent, tent, pairs, trip, cand)
	}
}

func BenchmarkScan(b *testing.B) {
	data, _ := os.ReadFile("testdata/rustc-book.html")
	for _, n := range []int{1, 10} {
		for _, sp := range []bool{true} {
			s := mustCompile(b, benchRules(n), Options{})
			b.Run(fmt.Sprintf("rules=%d/pairs=%v", n, sp), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				cpu0 := cpuTime()
				for range b.N {
					for i := 0; ; i++ {
						i = s.candidate(data, i, true)
						if i >= len(data) {
							break
						}
					}
				}
				reportCPU(b, cpuTime()-cpu0, len(data))
			})
		}
	}
}
