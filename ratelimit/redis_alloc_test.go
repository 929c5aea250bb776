package ratelimit

import (
	"context"
	"testing"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// TestRedisNamesAllocations: a request's Redis key names cost one
// allocation per zone, each name's string; the slice of them is the
// caller's array (it was one allocation more).
func TestRedisNamesAllocations(t *testing.T) {
	b := &redisPlan{prefix: "throttle:", zoneKeys: []string{"}:a:", "}:b:"}}
	keys := []requestKey{{text: "alice"}, {text: "bob"}}
	var tags [maxZones]tag
	var dst [maxZones]string
	if n := testing.AllocsPerRun(100, func() { b.names(keys, tags[:2], dst[:]) }); n > 2 && !raceEnabled {
		t.Errorf("names for 2 zones: %v allocations, want 2", n)
	}
}

const redisDecideAllocs = 2

// TestRedisDecideAllocations: what one decision allocates, rueidis's share
// included: 2 (the key's name, and rueidis's), where the names' slice and
// the answer's (AsIntSlice) made it 9, and a context.WithTimeout per
// decision 7 (sharedDeadline). A guard, so that a change that adds an
// allocation to every decision is seen.
func TestRedisDecideAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	rs := testredis.Start(t)
	h := redisHandler(t, rs, "deny", &Zone{Name: "r-allocs", Rate: "1000000/1s", Burst: new(int64(1000))})
	keys := []requestKey{{text: "alice"}}
	var out [1]outcome
	decide := func() {
		if _, err := h.redis.decide(context.Background(), keys, out[:], nil, allZones); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 { // connect, load the script, and let the client make its pipes
		decide()
	}
	n := testing.AllocsPerRun(200, decide)
	t.Logf("%v allocations per decision", n)
	if n > redisDecideAllocs {
		t.Errorf("a Redis decision: %v allocations, want at most %d", n, redisDecideAllocs)
	}
}
