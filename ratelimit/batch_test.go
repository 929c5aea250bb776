package ratelimit

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
	"github.com/redis/rueidis"
)

func batchClient(t *testing.T, addrs ...string) rueidis.Client {
	t.Helper()
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true, DisableRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// holdServer runs a script that keeps Redis busy for d on each of
// scriptBatch's lanes, and returns once every lane is out.
func holdServer(t *testing.T, b *scriptBatch, cl rueidis.Client, d time.Duration) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	for range batchLanes {
		wg.Go(func() {
			if res, err := b.do(context.Background(), cl, busyScript(cl, d)); err != nil || res.Error() != nil {
				t.Errorf("holding the server: %v %v", err, res.Error())
			}
		})
	}
	waitBatch(t, b, func() bool { return b.busy == batchLanes })
	return &wg
}

// busyScript is a script that keeps Redis busy for d. A command each
// time: rueidis recycles a command's memory once it is done.
func busyScript(cl rueidis.Client, d time.Duration) rueidis.Completed {
	return cl.B().Eval().Script(`local t = redis.call('TIME') local e = t[1]*1000000 + t[2] + tonumber(ARGV[1])
while true do t = redis.call('TIME') if t[1]*1000000 + t[2] >= e then return 1 end end`).Numkeys(0).Arg(strconv.FormatInt(d.Microseconds(), 10)).Build()
}

// waitBatch waits (bounded) until cond, read under b.mu, holds.
func waitBatch(t *testing.T, b *scriptBatch, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		ok := cond()
		b.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("scriptBatch never reached the state waited for")
		}
	}
}

// TestScriptBatchGathersWhileLanesAreOut: calls made while every lane is
// out wait, all of them, and each gets its own reply once a lane comes
// back; then every lane is free again.
func TestScriptBatchGathersWhileLanesAreOut(t *testing.T) {
	rs := testredis.Start(t)
	cl := batchClient(t, rs.Addr())
	var b scriptBatch
	// More calls than batchMax: two pipelines at least.
	gatherWhileHeld(t, &b, cl, 300*time.Millisecond, 300, func(i int) {
		want := "call-" + strconv.Itoa(i)
		res, err := b.do(context.Background(), cl, cl.B().Echo().Message(want).Build())
		if err != nil {
			t.Errorf("call %d: %v", i, err)
			return
		}
		if got, err := res.ToString(); err != nil || got != want {
			t.Errorf("call %d got %q (%v), want its own reply %q", i, got, err, want)
		}
	})
}

// gatherWhileHeld holds the server on every lane of b for d (through
// holder), makes n calls at once, waits until all of them wait for a lane,
// and returns once they and the lanes are done, b idle again.
func gatherWhileHeld(t *testing.T, b *scriptBatch, holder rueidis.Client, d time.Duration, n int, call func(i int)) {
	t.Helper()
	hold := holdServer(t, b, holder, d)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { call(i) })
	}
	waitBatch(t, b, func() bool { return len(b.waiting) == n })
	hold.Wait()
	wg.Wait()
	assertIdle(t, b)
}

// assertIdle fails t unless b comes to rest, no lane out and nothing
// waiting, soon after its calls are done (a pipeline brings its lane back
// after it has given its calls their replies).
func assertIdle(t *testing.T, b *scriptBatch) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		busy, waiting := b.busy, len(b.waiting)
		b.mu.Unlock()
		if busy == 0 && waiting == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d lanes out, %d waiting 10s after the calls ended; want none", busy, waiting)
		}
	}
}

// TestScriptBatchWaitBoundedByDeadline: a waiting call whose deadline
// passes returns at once with its context's error, whatever the lanes
// do, and leaves no lane taken.
func TestScriptBatchWaitBoundedByDeadline(t *testing.T) {
	rs := testredis.Start(t)
	cl := batchClient(t, rs.Addr())
	var b scriptBatch
	hold := holdServer(t, &b, cl, 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.do(ctx, cl, cl.B().Echo().Message("late").Build())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("a call with a 50ms deadline returned after %v, behind the lanes", waited)
	}
	hold.Wait()
	assertIdle(t, &b)
	if res, err := b.do(context.Background(), cl, cl.B().Echo().Message("next").Build()); err != nil || res.Error() != nil {
		t.Fatalf("the call after: %v %v", err, res.Error())
	}
}

// TestScriptBatchLateCallOutlivesOlder: a call that joins a pipeline
// late is bounded by its own deadline, not by an older call's: the older
// call's deadline passes while their pipeline runs, and the late call
// still gets its reply (it used to get the older call's timeout, a whole
// pipeline of decisions lost at once).
func TestScriptBatchLateCallOutlivesOlder(t *testing.T) {
	rs := testredis.Start(t)
	cl := batchClient(t, rs.Addr())
	var b scriptBatch
	hold := holdServer(t, &b, cl, 100*time.Millisecond)
	older := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		// Its own script outlasts its deadline: the pipeline runs past it.
		res, err := b.do(ctx, cl, busyScript(cl, 300*time.Millisecond))
		if err == nil {
			err = res.Error()
		}
		older <- err
	}()
	waitBatch(t, &b, func() bool { return len(b.waiting) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := b.do(ctx, cl, cl.B().Echo().Message("late").Build())
	if err == nil {
		err = res.Error()
	}
	if got, _ := res.ToString(); err != nil || got != "late" {
		t.Errorf("the late call, its deadline 5s away: %q, %v; want its reply", got, err)
	}
	if err := <-older; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the older call, past its deadline: %v, want context.DeadlineExceeded", err)
	}
	hold.Wait()
	assertIdle(t, &b)
}

// TestScriptBatchDeadlinesPass: many calls whose deadlines pass while
// the server is held busy, as a handler's do (their contexts from one
// sharedDeadline); every call ends, by its own reply or its deadline, and
// no lane is left taken (a pipeline whose calls have all given up still
// brings its lane back).
func TestScriptBatchDeadlinesPass(t *testing.T) {
	rs := testredis.Start(t)
	cl := batchClient(t, rs.Addr())
	var b scriptBatch
	deadline := sharedDeadline{timeout: 25 * time.Millisecond}
	var timedOut, answered atomic.Int64
	for round := range 5 {
		hold := holdServer(t, &b, cl, 30*time.Millisecond)
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				time.Sleep(time.Duration(rand.IntN(100)) * time.Millisecond) // some while the server is held, some after
				want := strconv.Itoa(round) + "/" + strconv.Itoa(i)
				res, err := b.do(deadline.context(time.Now()), cl, cl.B().Echo().Message(want).Build())
				if err == nil {
					err = res.Error()
				}
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("call %s: %v", want, err)
					}
					timedOut.Add(1)
					return
				}
				answered.Add(1)
				if got, err := res.ToString(); err != nil || got != want {
					t.Errorf("call %s got %q (%v), not its own reply", want, got, err)
				}
			})
		}
		hold.Wait()
		wg.Wait()
	}
	t.Logf("%d answered, %d past their deadline", answered.Load(), timedOut.Load())
	if timedOut.Load() == 0 || answered.Load() == 0 {
		t.Errorf("%d answered, %d past their deadline: the test wants both", answered.Load(), timedOut.Load())
	}
	assertIdle(t, &b)
}

// panickyClient is a real client whose Do and DoMulti panic once armed,
// as rueidis does when it refuses a command (a cluster client, keys of
// different slots): no such command reaches the batch from a standalone
// server, so the refusal is made up here.
type panickyClient struct {
	rueidis.Client
	armed *atomic.Bool
}

func (c panickyClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if c.armed.Load() {
		panic("refused")
	}
	return c.Client.Do(ctx, cmd)
}

func (c panickyClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	if c.armed.Load() {
		panic("refused")
	}
	return c.Client.DoMulti(ctx, cmds...)
}

// TestScriptBatchClientPanicIsAnError: a client that panics gives the
// call alone, and every call of a pipeline, an error; the process lives
// and the lanes come back.
func TestScriptBatchClientPanicIsAnError(t *testing.T) {
	rs := testredis.Start(t)
	real := batchClient(t, rs.Addr())
	var armed atomic.Bool
	cl := panickyClient{real, &armed}
	var b scriptBatch
	armed.Store(true)
	if _, err := b.do(context.Background(), cl, real.B().Echo().Message("x").Build()); err == nil {
		t.Fatal("a call alone, the client panicking: no error")
	}
	// The lanes are held through the real client; the calls that wait are
	// sent through the panicking one.
	gatherWhileHeld(t, &b, real, 200*time.Millisecond, 20, func(i int) {
		if _, err := b.do(context.Background(), cl, real.B().Echo().Message(strconv.Itoa(i)).Build()); err == nil {
			t.Errorf("call %d of a pipeline, the client panicking: no error", i)
		}
	})
}

// TestRedisScriptFlushed: a server that lost the script (SCRIPT FLUSH, a
// restart) answers the batched EVALSHA with NOSCRIPT; the decision then
// loads it and is decided as ever.
func TestRedisScriptFlushed(t *testing.T) {
	rs := testredis.Start(t)
	h := redisHandler(t, rs, "deny", &Zone{Name: "r-flushed", Rate: "1/1m"})
	var out [1]outcome
	decide := func(caller string) bool {
		t.Helper()
		allowed, err := h.redis.decide(context.Background(), []requestKey{{text: caller}}, out[:], nil, allZones)
		if err != nil {
			t.Fatalf("decision for %s: %v", caller, err)
		}
		return allowed
	}
	if !decide("a") {
		t.Fatal("first request of a refused")
	}
	if r := testredis.Command(t, rs.Addr(), "SCRIPT", "FLUSH"); r != "OK" {
		t.Fatalf("SCRIPT FLUSH: %q", r)
	}
	if decide("a") {
		t.Fatal("second request of a within its minute passed after SCRIPT FLUSH")
	}
	if !decide("b") {
		t.Fatal("first request of b refused after SCRIPT FLUSH")
	}
}
