package clientip

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// An assertion is accepted once: presented again within max_age, on its own
// request, it is refused as a replay (counted); past max_age it is refused
// as expired, whatever the record says.
func TestAssertionUsedOnce(t *testing.T) {
	pop := popHandler(t, "k1", testKey1)
	const target = "http://shop.example/cart/add?item=42"
	good := signAt(t, pop, "POST", target)
	origin := originHandler(t, time.Second, "k1", testKey1)
	replayed := metrics.untrusted.WithLabelValues("assertion_replayed", "reject")
	before := testutil.ToFloat64(replayed)

	s, err := serveRequest(t, origin, newRequest("POST", target, popPeer, "X-Edge-Assertion", good))
	if err != nil || s.clientIP != phone {
		t.Fatalf("first use: client %v, err %v", s.clientIP, err)
	}
	for range 2 {
		s, err = serveRequest(t, origin, newRequest("POST", target, popPeer, "X-Edge-Assertion", good))
		refusedFor(t, s, err, "assertion_replayed")
	}
	if got := testutil.ToFloat64(replayed) - before; got != 2 {
		t.Errorf("untrusted_total{reason=assertion_replayed} grew by %v, want 2", got)
	}
	// Another request the PoP signed in the same second is its own.
	other := signAt(t, pop, "POST", target+"&n=2")
	if _, err := serveRequest(t, origin, newRequest("POST", target+"&n=2", popPeer, "X-Edge-Assertion", other)); err != nil {
		t.Errorf("another assertion of the same second: %v", err)
	}
	origin.resolver.verify.now = func() time.Time { return testEpoch.Add(30*time.Second + time.Nanosecond) }
	s, err = serveRequest(t, origin, newRequest("POST", target, popPeer, "X-Edge-Assertion", good))
	refusedFor(t, s, err, "assertion_expired")
}

// Only genuine assertions within their window take room in the record: a
// tampered or expired one leaves the genuine one usable once.
func TestRefusedAssertionsAreNotRecorded(t *testing.T) {
	pop := popHandler(t, "k1", testKey1)
	const target = "http://shop.example/p"
	good := signAt(t, pop, "GET", target)
	origin := originHandler(t, 0, "k1", testKey1)
	for _, value := range []string{flipLast(good), strings.Replace(good, "t=1764590000", "t=1764590001", 1)} {
		s, err := serveRequest(t, origin, newRequest("GET", target, popPeer, "X-Edge-Assertion", value))
		refusedFor(t, s, err, "assertion_bad_signature")
	}
	if _, err := serveRequest(t, origin, newRequest("GET", target, popPeer, "X-Edge-Assertion", good)); err != nil {
		t.Errorf("the genuine assertion after forgeries: %v", err)
	}
}

// A full record refuses further assertions rather than forget valid ones,
// and takes them again once what it holds has expired.
func TestReplayCacheFullRefusesThenRecovers(t *testing.T) {
	h := provision(t, `{"trusted_proxies":["10.0.0.0/8"],"untrusted":"reject","verify":{"keys":[{"id":"k1","secret":"`+testKey1+`"}],"max_age":"10s","replay_cache_size":1024}}`)
	at := testEpoch
	h.resolver.verify.now = func() time.Time { return at }
	core, logs := observer.New(zap.ErrorLevel)
	h.logger = zap.New(core)
	pop := popHandler(t, "k1", testKey1)
	const target = "http://shop.example/p?n="

	accepted, full := 0, 0
	for i := range 4096 {
		tgt := fmt.Sprint(target, i)
		_, err := serveRequest(t, h, newRequest("GET", tgt, popPeer, "X-Edge-Assertion", signAt(t, pop, "GET", tgt)))
		switch {
		case err == nil:
			accepted++
		case strings.Contains(err.Error(), "(assertion_replay_cache_full)"):
			full++
		default:
			t.Fatalf("request %d: %v", i, err)
		}
	}
	// 64 shards of 16 each: the record fills, unevenly, at 1024 at most.
	if accepted > 1024 || accepted < 512 || full != 4096-accepted {
		t.Errorf("accepted %d, refused as full %d, want at most 1024 accepted and the rest refused", accepted, full)
	}
	if n := logs.FilterMessageSnippet("the record of used assertions is full").Len(); n != 1 {
		t.Errorf("%d log lines about the full record for %d refusals, want 1 per %v", n, full, logInterval)
	}
	// The first accepted are still remembered: a replay is a replay even
	// when full.
	s, err := serveRequest(t, h, newRequest("GET", target+"0", popPeer, "X-Edge-Assertion", signAt(t, pop, "GET", target+"0")))
	refusedFor(t, s, err, "assertion_replayed")

	// Once they are older than 1.2 x max_age + 5s (generations are
	// dropped whole), fresh assertions find room.
	at = testEpoch.Add(17 * time.Second)
	pop.signer.now = func() time.Time { return at }
	for i := range 256 {
		tgt := fmt.Sprint(target, "later-", i)
		if _, err := serveRequest(t, h, newRequest("GET", tgt, popPeer, "X-Edge-Assertion", signAt(t, pop, "GET", tgt))); err != nil {
			t.Fatalf("after the record's entries expired, request %d: %v", i, err)
		}
	}
}

// The record against a reference that remembers everything: as time moves
// on and assertions of every acceptable age arrive (a PoP clock up to
// futureSkew ahead, or max_age behind), an assertion still within its
// window is never forgotten, and the record holds no more than its bound.
func TestReplayCacheNeverForgetsAValidAssertion(t *testing.T) {
	for _, maxAge := range []time.Duration{minMaxAge, 2500 * time.Millisecond, defaultMaxAge, 47 * time.Second, maxMaxAge} {
		t.Run(maxAge.String(), func(t *testing.T) {
			const size = 1 << 14
			c := newReplayCache(maxAge, size)
			rng := rand.New(rand.NewPCG(1, uint64(maxAge)))
			type used struct {
				key replayKey
				t   int64
			}
			var all []used
			now := testEpoch
			for step := range 3000 {
				now = now.Add(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
				oldest := oldestAccepted(now, maxAge)
				newest := now.Add(futureSkew).Unix()
				for range 4 {
					u := used{replayKey{rng.Uint64(), rng.Uint64()}, oldest + rng.Int64N(newest-oldest+1)}
					if why := c.use(u.key, u.t, oldest); why != reasonNone {
						t.Fatalf("step %d: a new assertion refused: %v", step, why)
					}
					all = append(all, u)
				}
				for range 8 { // replays of earlier ones still valid
					u := all[rng.IntN(len(all))]
					if u.t < oldest || u.t > newest {
						continue
					}
					if why := c.use(u.key, u.t, oldest); why != reasonAssertionReplayed {
						t.Fatalf("step %d (now %v, max_age %v): an assertion signed at %d, still valid, was forgotten: %v", step, now.Unix(), maxAge, u.t, why)
					}
				}
				for i := range c.shards {
					if sh := &c.shards[i]; sh.n > c.perShard {
						t.Fatalf("shard %d holds %d, bound %d", i, sh.n, c.perShard)
					}
				}
			}
		})
	}
}

// Each generation spans width seconds, and the generations still holding
// valid assertions fit in replayGens-1 slots for every max_age.
func TestReplayCacheGenerationsCoverTheWindow(t *testing.T) {
	for age := minMaxAge; age <= maxMaxAge; age += 250 * time.Millisecond {
		c := newReplayCache(age, minReplayCacheSize)
		span := int64((age + futureSkew + time.Second - 1) / time.Second)
		if (replayGens-1)*c.width <= span {
			t.Fatalf("max_age %v: %d generations of %ds do not cover %ds of signing times", age, replayGens-1, c.width, span)
		}
	}
}

// resetReplayCache empties every generation, keeping its map's capacity,
// as recycling does in steady state.
func resetReplayCache(c *replayCache) {
	for i := range c.shards {
		sh := &c.shards[i]
		for j := range sh.gens {
			sh.n -= len(sh.gens[j].set)
			clear(sh.gens[j].set)
		}
	}
}

// Once the record is warm (its maps grown), accepting fresh assertions
// allocates nothing.
func TestVerifyFreshAssertionsDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	pop := popHandler(t, "k1", testKey1)
	origin := originHandler(t, 0, "k1", testKey1)
	const target = "http://shop.example/a/b?c=d"
	reqs := make([]*http.Request, 0, 512)
	for i := range 512 {
		client := fmt.Sprintf("203.0.%d.%d", i/256, i%256)
		r := newRequest("GET", target, popPeer)
		r.Header.Set("X-Edge-Assertion", pop.signer.sign(client, r))
		reqs = append(reqs, r)
	}
	run := func() {
		for _, r := range reqs {
			if res := origin.resolver.resolveRequest(r); res.reason != reasonNone {
				t.Fatalf("reason %v", res.reason)
			}
		}
	}
	run() // grows the maps
	resetReplayCache(origin.resolver.verify.used)
	if n := testing.AllocsPerRun(1, func() { run(); resetReplayCache(origin.resolver.verify.used) }); n != 0 {
		t.Errorf("%v allocations per %d fresh assertions, want 0", n, len(reqs))
	}
}

// A reload keeps the record: Caddy provisions the new config while the old
// one serves, then cleans the old one up; an assertion used before the
// reload is still used after it. Once no handler holds the record, it is
// let go.
func TestReplayRecordSurvivesAReload(t *testing.T) {
	pop := popHandler(t, "k1", testKey1)
	const target = "http://shop.example/reload"
	good := signAt(t, pop, "GET", target)
	config := `{"trusted_proxies":["10.0.0.0/8"],"untrusted":"reject","verify":{"keys":[{"id":"k1","secret":"` + testKey1 + `"}],"max_age":"41s"}}`
	old, err := tryProvision(config)
	if err != nil {
		t.Fatal(err)
	}
	old.resolver.verify.now = func() time.Time { return testEpoch }
	if _, err := serveRequest(t, old, newRequest("GET", target, popPeer, "X-Edge-Assertion", good)); err != nil {
		t.Fatalf("first use: %v", err)
	}
	next, err := tryProvision(config)
	if err != nil {
		t.Fatal(err)
	}
	next.resolver.verify.now = old.resolver.verify.now
	_ = old.Cleanup()
	s, err := serveRequest(t, next, newRequest("GET", target, popPeer, "X-Edge-Assertion", good))
	refusedFor(t, s, err, "assertion_replayed")

	key := next.replayKey
	if refs, ok := replayRecords.References(key); !ok || refs != 1 {
		t.Errorf("record %q held %d times (%v), want once", key, refs, ok)
	}
	_ = next.Cleanup()
	if _, ok := replayRecords.References(key); ok {
		t.Errorf("record %q still held after every handler let go", key)
	}
}
