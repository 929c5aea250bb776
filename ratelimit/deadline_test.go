package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSharedDeadlineBounds: every call's context ends no later than timeout
// after the call and no sooner than timeout - timeout/32; calls close
// together share one context, and one that would end too soon is replaced.
func TestSharedDeadlineBounds(t *testing.T) {
	const timeout = 320 * time.Millisecond
	s := &sharedDeadline{timeout: timeout}
	t0 := time.Now()
	first := s.context(t0)
	seen := map[context.Context]bool{}
	for step := time.Duration(0); step <= 3*timeout; step += time.Millisecond {
		now := t0.Add(step)
		c := s.context(now)
		seen[c] = true
		dl, ok := c.Deadline()
		if !ok {
			t.Fatalf("at +%v: a context without a deadline", step)
		}
		if left := dl.Sub(now); left > timeout || left < timeout-timeout/deadlineSlices {
			t.Fatalf("at +%v: the context ends %v later, want %v to %v", step, left, timeout-timeout/deadlineSlices, timeout)
		}
		if step <= timeout/deadlineSlices && c != first {
			t.Fatalf("at +%v: a new context, want the one of +0 (ends %v later)", step, dl.Sub(now))
		}
	}
	// 961 calls a millisecond apart, each context serving the 11 calls
	// of its 10ms: 88; never more than one per timeout/32 (97).
	if n := len(seen); n < 80 || n > 3*deadlineSlices+1 {
		t.Errorf("%d contexts for 3 timeouts of calls, want 80 to %d", n, 3*deadlineSlices+1)
	}
}

// TestSharedDeadlineExpires: the context ends with DeadlineExceeded, as
// context.WithTimeout's did (rueidis and on_error see the same error).
func TestSharedDeadlineExpires(t *testing.T) {
	s := &sharedDeadline{timeout: time.Millisecond}
	c := s.context(time.Now())
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context did not end 10s after a 1ms timeout")
	}
	if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err() = %v, want context.DeadlineExceeded", err)
	}
	if c.Value("anything") != nil {
		t.Error("the context carries a value")
	}
}
