package clientip

import (
	"sync/atomic"
	"time"
)

// logInterval spaces the log lines about a condition that lasts (a source
// covering everything until it refreshes, a full record of used
// assertions until entries expire): a line per request would flood the
// log. The untrusted_total metric counts every request.
const logInterval = time.Minute

// logThrottle lets one line through per logInterval and counts the
// requests in between.
type logThrottle struct {
	lastLog  atomic.Int64 // unix nanoseconds of the last log line
	rejected atomic.Uint64
}

// shouldLog reports whether a line is due, and how many requests were
// refused since the last one.
func (g *logThrottle) shouldLog(now time.Time) (bool, uint64) {
	g.rejected.Add(1)
	last := g.lastLog.Load()
	if last != 0 && now.UnixNano()-last < int64(logInterval) {
		return false, 0
	}
	if !g.lastLog.CompareAndSwap(last, now.UnixNano()) {
		return false, 0
	}
	return true, g.rejected.Swap(0)
}
