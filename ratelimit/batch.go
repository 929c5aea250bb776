package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/redis/rueidis"
)

// scriptBatch sends the GCRA scripts of a handler's decisions that wait
// for its Redis server together. A decision that finds one of batchLanes lanes free
// takes it and sends its script at once, with whatever waits; one that
// finds every lane busy waits, and the first lane to come back sends all
// that wait (up to batchMax) in one pipeline, then the next lane's turn
// goes to the oldest of those that arrived meanwhile.
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
// round trip at most, before its script is sent. Every decision is still
// bounded by its own deadline: a pipeline is bounded by its sender's, the
// oldest of its calls, and a waiting call whose deadline passes returns
// at once.
type scriptBatch struct {
	mu      sync.Mutex
	waiting []*batchCall // oldest first
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

// batchCall is a waiting decision: its script and, once done has a
// value, either its reply or lead (its turn to send).
type batchCall struct {
	cmd  rueidis.Completed
	res  rueidis.RedisResult
	err  error         // the client's refusal, for every call of its pipeline
	lead bool          // it was given a lane (set under scriptBatch.mu)
	done chan struct{} // one value: res is set, or lead is
}

var batchCalls = sync.Pool{New: func() any { return &batchCall{done: make(chan struct{}, 1)} }}

// batchBuf holds a lane's calls while it is out. (Their commands get a
// slice of their own each time: rueidis may still read it after DoMulti
// returns on a deadline, writing the commands later.)
type batchBuf struct{ calls []*batchCall }

var batchBufs = sync.Pool{New: func() any { return new(batchBuf) }}

// do runs cmd (an EVALSHA of gcraScript) on client, with the others that
// wait, and returns its reply. ctx bounds it: a call whose ctx ends while
// it waits returns ctx's error at once, its script sent or not (a script
// sent and unread may still have charged, as with any timed-out call).
func (b *scriptBatch) do(ctx context.Context, client rueidis.Client, cmd rueidis.Completed) (rueidis.RedisResult, error) {
	b.mu.Lock()
	if b.busy < batchLanes {
		b.busy++
		b.mu.Unlock()
		return b.send(ctx, client, cmd)
	}
	c := batchCalls.Get().(*batchCall)
	c.cmd = cmd
	b.waiting = append(b.waiting, c)
	b.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		b.mu.Lock()
		if c.lead {
			b.passOn() // given a lane too late: the next call takes it
		} else if i := slices.Index(b.waiting, c); i >= 0 {
			b.waiting = slices.Delete(b.waiting, i, i+1)
		}
		b.mu.Unlock()
		// c is dropped, not pooled: a lane may still write to it.
		return rueidis.RedisResult{}, ctx.Err()
	}
	lead, res, err := c.lead, c.res, c.err
	*c = batchCall{done: c.done}
	batchCalls.Put(c)
	if lead {
		return b.send(ctx, client, cmd)
	}
	return res, err
}

// send takes a lane out: cmd and what waits go in one pipeline, bounded by
// ctx. The sender is the oldest call, and a handler's calls take their
// deadlines from one sharedDeadline, so its deadline is the earliest (up
// to that type's timeout/32): no call is held past its own deadline,
// the replies go to their calls, and the lane passes on.
func (b *scriptBatch) send(ctx context.Context, client rueidis.Client, cmd rueidis.Completed) (rueidis.RedisResult, error) {
	defer func() {
		b.mu.Lock()
		b.passOn()
		b.mu.Unlock()
	}()
	b.mu.Lock()
	if len(b.waiting) == 0 {
		b.mu.Unlock()
		return doOne(ctx, client, cmd)
	}
	buf := batchBufs.Get().(*batchBuf)
	n := min(len(b.waiting), batchMax-1)
	buf.calls = append(buf.calls[:0], b.waiting[:n]...)
	b.waiting = slices.Delete(b.waiting, 0, n)
	b.mu.Unlock()

	cmds := make(rueidis.Commands, 1, 1+n)
	cmds[0] = cmd
	for _, c := range buf.calls {
		cmds = append(cmds, c.cmd)
	}
	results, err := doMulti(ctx, client, cmds)
	for i, c := range buf.calls {
		c.res, c.err = results[i+1], err
		c.done <- struct{}{} // c is its caller's again
	}
	clear(buf.calls)
	batchBufs.Put(buf)
	return results[0], err
}

// passOn gives a lane that came back to the oldest waiting call, or frees
// it; b.mu is held.
func (b *scriptBatch) passOn() {
	if len(b.waiting) == 0 {
		b.busy--
		return
	}
	next := b.waiting[0]
	b.waiting = slices.Delete(b.waiting, 0, 1)
	next.lead = true
	next.done <- struct{}{}
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
