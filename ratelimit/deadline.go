package ratelimit

import (
	"context"
	"sync/atomic"
	"time"
)

// sharedDeadline gives Redis calls their deadline without a context and a
// timer each: every call started within the same 1/32 of timeout shares
// one context, which ends between timeout - timeout/32 and timeout after
// each call began (never later: timeout still bounds every call). A
// context.WithTimeout per decision was about a quarter of a Redis
// decision's CPU in Caddy and 4 of its 7 allocations.
type sharedDeadline struct {
	timeout time.Duration
	cur     atomic.Pointer[deadlineCtx]
}

// deadlineSlices is how many contexts a timeout's span holds: the
// granularity of the deadline (timeout/32) against how often a context
// and its timer are made (once per timeout/32, whatever the load).
const deadlineSlices = 32

// context is a context that ends at most timeout after now (the caller's
// clock reading, monotonic) and at least timeout - timeout/32 after it. It
// carries no values and no parent's cancellation: a caller that hangs up
// is no store failure.
func (s *sharedDeadline) context(now time.Time) context.Context {
	if c := s.cur.Load(); c != nil {
		if left := c.deadline.Sub(now); left <= s.timeout && left >= s.timeout-s.timeout/deadlineSlices {
			return c
		}
	}
	c := newDeadlineCtx(now.Add(s.timeout), s.timeout)
	// Two callers may race here; either context is right for both.
	s.cur.Store(c)
	return c
}

// deadlineCtx is a context that ends at deadline (context.DeadlineExceeded).
// Its timer is never stopped: it ends the context, after which nothing
// holds it, so at most deadlineSlices (plus a racing few) live at a time.
type deadlineCtx struct {
	deadline time.Time
	done     chan struct{} // closed at deadline
}

func newDeadlineCtx(deadline time.Time, in time.Duration) *deadlineCtx {
	c := &deadlineCtx{deadline: deadline, done: make(chan struct{})}
	time.AfterFunc(in, func() { close(c.done) })
	return c
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *deadlineCtx) Done() <-chan struct{}       { return c.done }
func (c *deadlineCtx) Value(any) any               { return nil }

func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
