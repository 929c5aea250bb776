package ratelimit

import (
	"math"
	"time"
)

// limit is one zone's GCRA parameters, in nanoseconds: the emission interval
// T and the tolerance tau = burst·T. A key's whole state is its theoretical
// arrival time (TAT): a request at now is allowed iff max(TAT, now) - now <=
// tau, and then TAT becomes max(TAT, now) + T. A TAT in the past is the same
// as no state at all, which is why expired keys can be forgotten freely.
type limit struct {
	interval  int64
	tolerance int64
}

func newLimit(r rate, burst int64) limit {
	t := r.interval()
	return limit{interval: t, tolerance: satMul(burst, t)}
}

// Config validation keeps interval and tolerance within maxWindow, so the
// arithmetic below stays far from int64's limit; it saturates anyway, so a
// value that got past validation makes a TAT stick at the far future (the
// key stays limited) instead of wrapping into the past (the key is let
// through).

// satAdd is a+b for a, b >= 0, capped at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// satMul is a·b for a, b >= 0, capped at math.MaxInt64.
func satMul(a, b int64) int64 {
	if b != 0 && a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// outcome is one zone's verdict on one request. after is TAT - now once the
// request has been decided: the new TAT if the request was let through, the
// unchanged one otherwise.
type outcome struct {
	allowed bool
	after   int64
}

// check is the GCRA test on a stored TAT; it returns the outcome if nothing
// is committed, and the TAT to store if the request is committed.
func (l limit) check(tat, now int64) (o outcome, next int64) {
	if tat < now {
		tat = now
	}
	return outcome{allowed: tat-now <= l.tolerance, after: tat - now}, satAdd(tat, l.interval)
}

// remaining is how many more requests would be allowed right now.
func (l limit) remaining(o outcome) int64 {
	return max(0, (satAdd(l.tolerance, l.interval)-o.after)/l.interval)
}

// wait is how long until the next request is allowed (0 if one is now).
func (l limit) wait(o outcome) time.Duration {
	if l.remaining(o) > 0 {
		return 0
	}
	return time.Duration(o.after - l.tolerance)
}

// ceilSeconds rounds d up to whole seconds (without the overflow of adding
// a second to a d near the largest Duration).
func ceilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}
