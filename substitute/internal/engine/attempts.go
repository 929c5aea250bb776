//go:build !enginestats

package engine

// attemptCounter counts the match attempts a stream starts, for the
// benchmarks' attempts/MB, only in builds with the enginestats tag
// (attempts_stats.go). Here it is empty and its methods compile to nothing,
// so the scan loop pays nothing for a figure only benchmarks read.
type attemptCounter struct{}

// attemptsCounted tells whether attemptCounter counts.
const attemptsCounted = false

func (*attemptCounter) add()   {}
func (*attemptCounter) reset() {}
func (*attemptCounter) n() int { return 0 }
