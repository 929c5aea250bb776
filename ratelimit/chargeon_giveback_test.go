package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// giveBackCase drives one memory zone of rate 1/1m, burst 1 (L = 2, one
// interval T = 1 minute) by hand: charge up front at a time, give back at a
// later one, then count how many more requests pass at the end.
type giveBackCase struct {
	t  *testing.T
	z  *zone
	h  uint64
	t0 int64
}

func newGiveBackCase(t *testing.T, name string) *giveBackCase {
	z := tableZone(name, defaultMaxKeys, "1/1m", 1)
	z.chargeOn = []int{401}
	return &giveBackCase{t: t, z: z, h: 42, t0: int64(time.Hour)}
}

func (c *giveBackCase) at(d time.Duration) int64 { return c.t0 + int64(d) }

func (c *giveBackCase) charge(d time.Duration) hold {
	c.t.Helper()
	var o outcome
	var hd hold
	if !decideOne(c.z, c.h, c.at(d), &o, &hd) {
		c.t.Fatalf("request at %v refused", d)
	}
	return hd
}

// tat is the key's TAT, as time after t0.
func (c *giveBackCase) tat() time.Duration {
	s := c.z.table.shard(c.h)
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.m[c.h] - c.t0)
}

// passing is how many requests pass at d (each charged, none given back).
func (c *giveBackCase) passing(d time.Duration) int {
	n := 0
	for {
		var o outcome
		var hd hold
		if !decideOne(c.z, c.h, c.at(d), &o, &hd) {
			return n
		}
		n++
	}
}

// TestGiveBackNeverReturnsTimeUsedUp: a charge held longer than time took
// to use it up gives nothing back once the key's TAT has passed and a new
// charge started afresh: giving back an interval then would give back the
// new request's charge.
func TestGiveBackNeverReturnsTimeUsedUp(t *testing.T) {
	c := newGiveBackCase(t, "giveback-expired")
	a := c.charge(0)
	b := c.charge(0) // TAT t0+2m
	refundMemory(c.z, c.h, a, c.at(time.Second))
	// The TAT is t0+61s: past at 62s, when a failing login is charged.
	c.charge(62 * time.Second) // kept: its 401 matched
	refundMemory(c.z, c.h, b, c.at(63*time.Second))
	// B's interval was used up by time; the 62s charge is all there is.
	if got := c.tat(); got != 122*time.Second {
		t.Fatalf("TAT %v after the give-back, want 2m2s: a give-back returned another request's charge", got)
	}
}

// TestGiveBackBoundedByEarlierGiveBacks: within one run of charges, a
// charge given back beneath another moves it down; the other's give-back
// is bounded by where it may now be, not where it was charged.
func TestGiveBackBoundedByEarlierGiveBacks(t *testing.T) {
	c := newGiveBackCase(t, "giveback-shifted")
	a := c.charge(0)
	b := c.charge(0)                             // TAT t0+2m
	refundMemory(c.z, c.h, a, c.at(time.Second)) // TAT t0+61s
	c.charge(60 * time.Second)                   // kept; TAT t0+121s, same run
	// B's interval now ends at t0+61s at most: used up at 62s.
	refundMemory(c.z, c.h, b, c.at(62*time.Second))
	if got := c.tat(); got != 121*time.Second {
		t.Fatalf("TAT %v after the give-back, want 2m1s: a give-back returned the kept charge", got)
	}
}

// TestGiveBackExact: one request at a time, a give-back restores the key
// exactly (as if the request never came), and never takes the TAT below
// now.
func TestGiveBackExact(t *testing.T) {
	c := newGiveBackCase(t, "giveback-exact")
	for i := range 10 {
		refundMemory(c.z, c.h, c.charge(time.Duration(i)*time.Second), c.at(time.Duration(i)*time.Second+time.Millisecond))
	}
	if n := c.passing(11 * time.Second); n != 2 {
		t.Fatalf("%d pass after 10 given back, want the whole burst, 2", n)
	}
	// A charge half used up by time gives back only what is left.
	c2 := newGiveBackCase(t, "giveback-half")
	hd := c2.charge(0)
	refundMemory(c2.z, c2.h, hd, c2.at(30*time.Second))
	if got := c2.tat(); got != 30*time.Second {
		t.Fatalf("TAT after giving back a half used charge: %v, want 30s (now)", got)
	}
}

// TestGiveBackRedisNewBlock: on Redis, a hold from before the key's TAT
// passed (here its key expired and came back) gives nothing back.
func TestGiveBackRedisNewBlock(t *testing.T) {
	rs := testredis.Start(t)
	h := redisHandler(t, rs, "deny", &Zone{Name: "giveback-redis", Rate: "1/1h", ChargeOn: &ChargeOn{Status: []int{401}}})
	keys := []requestKey{{text: "k"}}
	var out [1]outcome
	var old, kept [1]hold
	ctx := context.Background()
	if ok, err := h.redis.decide(ctx, keys, out[:], old[:], allZones); !ok || err != nil {
		t.Fatalf("first: %v %v", ok, err)
	}
	name := h.redis.names(keys, make([]tag, 1), make([]string, 1))[0]
	testredis.Command(t, rs.Addr(), "DEL", name) // as its expiry would
	if ok, err := h.redis.decide(ctx, keys, out[:], kept[:], allZones); !ok || err != nil {
		t.Fatalf("after expiry: %v %v", ok, err)
	}
	if kept[0].block <= old[0].block {
		t.Fatalf("blocks %d then %d: a new one must be later", old[0].block, kept[0].block)
	}
	if err := h.redis.giveBack(ctx, keys, old[:], []bool{true}); err != nil {
		t.Fatal(err)
	}
	if ok, err := h.redis.decide(ctx, keys, out[:], kept[:], allZones); ok || err != nil {
		t.Fatalf("after the old hold's give-back: allowed %v, %v; want refused (the kept charge stays)", ok, err)
	}
}
