package ratelimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// serveUser is serveWith with an X-User header; it returns the status.
func serveUser(t *testing.T, h *Handler, ip, user string, next caddyhttp.HandlerFunc) int {
	t.Helper()
	return serveWith(t, h, ip, map[string]string{"X-User": user}, next).status
}

// TestRedisClusterChargeOn: on a Redis Cluster, charge_on zones keyed
// differently (by address and by user: different slots) are charged each in
// its own slot, and a request another zone rejects refunds nothing in a
// charge_on zone (which its decision never charged).
func TestRedisClusterChargeOn(t *testing.T) {
	c := testredis.StartCluster(t, 3)
	prefix := fmt.Sprintf("test-%d:", time.Now().UnixNano())
	byUser := "{http.request.header.X-User}"
	h := clusterHandlerPrefix(t, c, prefix,
		&Zone{Name: "cc-ip", Rate: "2/1h", Burst: new(int64(1)), ChargeOn: &ChargeOn{Status: []int{401}}},
		&Zone{Name: "cc-user", Key: byUser, Rate: "3/1h", Burst: new(int64(2)), ChargeOn: &ChargeOn{Status: []int{401}}},
	)
	fail := login(false, false)
	for i, want := range []int{401, 401, 429} {
		if got := serveUser(t, h, "192.0.2.1", "alice", fail); got != want {
			t.Fatalf("alice from .1, attempt %d: %d, want %d (a store error is 503)", i+1, got, want)
		}
	}
	// cc-user was charged twice in its own slot: one failure left for alice.
	for i, want := range []int{401, 429} {
		if got := serveUser(t, h, "192.0.2.2", "alice", fail); got != want {
			t.Fatalf("alice from .2, attempt %d: %d, want %d", i+1, got, want)
		}
	}

	// A plain zone by address rejects the second request; the charge_on
	// zone by user keeps its one charge (no refund of what it never took).
	h2 := clusterHandlerPrefix(t, c, prefix,
		&Zone{Name: "cr-all", Rate: "1/1h"},
		&Zone{Name: "cr-fail", Key: byUser, Rate: "1/1h", Burst: new(int64(1)), ChargeOn: &ChargeOn{Status: []int{401}}},
	)
	for i, want := range []int{401, 429} {
		if got := serveUser(t, h2, "192.0.2.3", "bob", fail); got != want {
			t.Fatalf("bob, attempt %d: %d, want %d", i+1, got, want)
		}
	}
	only := clusterHandlerPrefix(t, c, prefix,
		&Zone{Name: "cr-fail", Key: byUser, Rate: "1/1h", Burst: new(int64(1)), ChargeOn: &ChargeOn{Status: []int{401}}})
	for i, want := range []int{401, 429} {
		if got := serveUser(t, only, "192.0.2.4", "bob", fail); got != want {
			t.Fatalf("cr-fail alone afterwards, attempt %d: %d, want %d (one charge left of two)", i+1, got, want)
		}
	}
}
