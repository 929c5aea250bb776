//go:build enginestats

package engine

// attemptCounter counts the match attempts a stream starts (see
// attempts.go): go test -tags enginestats -bench . reports attempts/MB.
type attemptCounter struct{ count int }

// attemptsCounted tells whether attemptCounter counts.
const attemptsCounted = true

func (c *attemptCounter) add()   { c.count++ }
func (c *attemptCounter) reset() { c.count = 0 }
func (c *attemptCounter) n() int { return c.count }
