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
	// full: a concurrent zone refused a new key because its table is full
	// (max_keys), not because the key reached its limit.
	full bool
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

// wait is how long until zone z would allow the next request; for a
// concurrent zone, unknown (a slot frees when a request ends): 0, so
// Retry-After says the least, 1.
func (z *zone) wait(o outcome) time.Duration {
	if z.slots > 0 {
		return 0
	}
	return z.limit.wait(o)
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

// hold is what a charge_on zone's up-front charge needs to be given back
// (chargeon.go): the key's TAT right after this request's charge, how much the
// key had given back in its current block then, and that block.
type hold struct {
	tat   int64
	given int64
	block int64
}

// giveBack is how much of one request's up-front charge to give back now,
// on a key at tat that has given back given in the request's block so far.
//
// The charge was one interval ending at h.tat. Since then, charges given
// back beneath it may have moved it down by at most given - h.given, and
// time has used up whatever of it lies before now; only the rest is still
// the request's to give back. So it is at most the interval, at most what
// of the charge is left at its lowest possible place, and never takes the
// TAT below now. What is left of it is never more than the charge itself,
// so no other request's charge is ever given back.
func (l limit) giveBack(tat, given int64, h hold, now int64) int64 {
	end := h.tat - (given - h.given)
	return max(0, min(l.interval, end-now, tat-now))
}
