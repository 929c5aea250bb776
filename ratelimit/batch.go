package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// scriptBatch sends the GCRA scripts of a handler's decisions that wait
// for its Redis server together. A decision that finds one of batchLanes
// lanes free takes it and sends its script at once; one that finds every
// lane out waits, and the first lane to come back sends all that wait (up
// to batchMax) in one pipeline.
//
// Why: rueidis writes each command as it comes, so under load every
// script was a write of its own from Caddy and a read of its own in
// Redis. Redis spends 12.5 µs of CPU on the script alone and 7.0 µs
// among 16 (redis-benchmark -P 1 against -P 16, the same script), and each
// write is a syscall and a goroutine hand-off in Caddy
// (docs/benchmarks.md, throttle).
//
// It changes no outcome: each script is the same atomic EVALSHA, and
// Redis runs a pipeline's commands one after another. A decision alone
// (nothing in flight) goes out at once, as before. Under load a decision
// that arrives while every lane is out waits for one to come back, a
// round trip at most, before its script is sent. Every decision is
// bounded by its own deadline and by nothing shorter: a call returns when
// its deadline passes, waiting or sent, and a pipeline runs in a goroutine
// of its own, bounded by the latest deadline of its calls, so a call that
// joined late still gets its reply when an older one of the same pipeline
// has given up.
type scriptBatch struct {
	mu      sync.Mutex
	waiting []*batchCall // oldest first; empty while a lane is free
	busy    int          // lanes out
}

// batchLanes is how many pipelines may be out at once: two, so that one
// slow reply does not hold every decision, and few, so that decisions
// gather while they are out (one, two and four lanes measured alike on
// loopback; see docs/benchmarks.md).
const batchLanes = 2

// batchMax bounds one pipeline: rueidis sends longer ones on a connection
// of their own (BlockingPipeline), and one reply set stays small.
const batchMax = 128

// batchCall is a waiting decision: its script, the client and deadline it
// came with, and, once done has a value, its reply.
type batchCall struct {
	cmd      rueidis.Completed
	client   rueidis.Client
	deadline time.Time // zero: none
	res      rueidis.RedisResult
	err      error         // the client's refusal, for every call of its pipeline
	done     chan struct{} // one value: res and err are set
}

var batchCalls = sync.Pool{New: func() any { return &batchCall{done: make(chan struct{}, 1)} }}

// do runs cmd (an EVALSHA of gcraScript) on client, with the others that
// wait, and returns its reply. ctx bounds it: a call whose ctx ends
// returns ctx's error at once, its script sent or not (a script sent and
// unread may still have charged, as with any timed-out call); only ctx's
// deadline reaches a pipeline, as decisions are bounded by time alone.
func (b *scriptBatch) do(ctx context.Context, client rueidis.Client, cmd rueidis.Completed) (rueidis.RedisResult, error) {
	b.mu.Lock()
	if b.busy < batchLanes {
		b.busy++
		b.mu.Unlock()
		defer b.laneBack()
		return doOne(ctx, client, cmd)
	}
	c := batchCalls.Get().(*batchCall)
	c.cmd, c.client = cmd, client
	c.deadline, _ = ctx.Deadline()
	b.waiting = append(b.waiting, c)
	b.mu.Unlock()
	select {
	case <-c.done:
		res, err := c.res, c.err
		*c = batchCall{done: c.done}
		batchCalls.Put(c)
		return res, err
	case <-ctx.Done():
		b.mu.Lock()
		if i := slices.Index(b.waiting, c); i >= 0 {
			b.waiting = slices.Delete(b.waiting, i, i+1)
		}
		// Still waiting or not, c is dropped, not pooled: a pipeline
		// that took it may still write to it.
		b.mu.Unlock()
		return rueidis.RedisResult{}, ctx.Err()
	}
}

// laneBack takes a lane that came back: what waits goes out on it in one
// pipeline, the oldest first, or it is free.
func (b *scriptBatch) laneBack() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiting) == 0 {
		b.busy--
		return
	}
	// One client a pipeline: the oldest call's (a reconnect replaces the
	// handler's client; a call made before it goes out on its own).
	first := b.waiting[0].client
	calls := make([]*batchCall, 0, min(len(b.waiting), batchMax))
	kept := b.waiting[:0]
	for _, c := range b.waiting {
		if len(calls) < batchMax && c.client == first {
			calls = append(calls, c)
		} else {
			kept = append(kept, c)
		}
	}
	clear(b.waiting[len(kept):])
	b.waiting = kept
	go b.pipeline(calls)
}

// pipeline sends calls' scripts in one DoMulti, bounded by the latest of
// their deadlines (none if one has none), gives each call its reply, and
// brings the lane back. A call whose deadline passes first has returned
// already, and its reply is dropped. The command slice is never reused:
// rueidis may still read it after DoMulti returns on a deadline.
func (b *scriptBatch) pipeline(calls []*batchCall) {
	defer b.laneBack()
	ctx := context.Background()
	if last, ok := latestDeadline(calls); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, last)
		defer cancel()
	}
	cmds := make(rueidis.Commands, len(calls))
	for i, c := range calls {
		cmds[i] = c.cmd
	}
	results, err := doMulti(ctx, calls[0].client, cmds)
	for i, c := range calls {
		c.res, c.err = results[i], err
		c.done <- struct{}{} // c is its caller's again
	}
}

// latestDeadline is the latest deadline of calls, and false if one of
// them has none.
func latestDeadline(calls []*batchCall) (time.Time, bool) {
	var last time.Time
	for _, c := range calls {
		if c.deadline.IsZero() {
			return time.Time{}, false
		}
		if c.deadline.After(last) {
			last = c.deadline
		}
	}
	return last, true
}

// doOne is client.Do, a panic of the client's (rueidis refuses some
// commands by panicking) turned into an error: a waiting call must never
// be left without its turn.
func doOne(ctx context.Context, client rueidis.Client, cmd rueidis.Completed) (res rueidis.RedisResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = rueidis.RedisResult{}, fmt.Errorf("redis client refused the GCRA script: %v", r)
		}
	}()
	return client.Do(ctx, cmd), nil
}

// doMulti is client.DoMulti, a panic turned into an error for them all.
func doMulti(ctx context.Context, client rueidis.Client, cmds rueidis.Commands) (res []rueidis.RedisResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = make([]rueidis.RedisResult, len(cmds)), fmt.Errorf("redis client refused the GCRA scripts: %v", r)
		}
	}()
	return client.DoMulti(ctx, cmds...), nil
}
