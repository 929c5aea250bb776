package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// TestRedisClusterSlotFailureRefunds: zones keyed differently live in
// different slots; when one slot's script fails (here its key holds a
// list, so GET fails with WRONGTYPE) after another slot consumed, the
// consumed slot is refunded: a request on_error deny answers 503 for costs
// the caller nothing. (Before, the consumed slot kept its charge.)
func TestRedisClusterSlotFailureRefunds(t *testing.T) {
	c := testredis.StartCluster(t, 3)
	prefix := fmt.Sprintf("test-%d:", time.Now().UnixNano())
	byUser := "{http.request.header.X-User}"
	for _, chargeOn := range []*ChargeOn{nil, {Status: []int{401}}} {
		name := "sf-ip"
		if chargeOn != nil {
			name = "sf-ip-charge-on"
		}
		t.Run(name, func(t *testing.T) {
			h := clusterHandlerPrefix(t, c, prefix,
				&Zone{Name: name, Rate: "1/1h", ChargeOn: chargeOn},
				&Zone{Name: name + "-user", Key: byUser, Rate: "100/1h", Burst: new(int64(99))},
			)
			u := slices.IndexFunc(h.zones, func(z *zone) bool { return z.name == name+"-user" })
			keys := make([]requestKey, len(h.zones))
			for i, z := range h.zones {
				keys[i] = z.key.fromString("192.0.2.9")
			}
			keys[u] = requestKey{text: "mallory"}
			tags := make([]tag, len(keys))
			names := h.redis.names(keys, tags, make([]string, len(keys)))
			if tags[0] == tags[1] {
				t.Fatal("the zones' keys share a slot: the test needs two")
			}
			ctx := context.Background()
			client, err := h.redis.conn.get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := client.Do(ctx, client.B().Lpush().Key(names[u]).Element("not a TAT").Build()).Error(); err != nil {
				t.Fatal(err)
			}
			if got := serveUser(t, h, "192.0.2.9", "mallory", login(false, false)); got != 503 {
				t.Fatalf("with the user slot failing: %d, want 503 (on_error deny)", got)
			}
			only := clusterHandlerPrefix(t, c, prefix, &Zone{Name: name, Rate: "1/1h", ChargeOn: chargeOn})
			if got := serveUser(t, only, "192.0.2.9", "alice", login(false, false)); got != 401 {
				t.Fatalf("the address zone afterwards: %d, want 401 (the failed decision refunded)", got)
			}
		})
	}
}
