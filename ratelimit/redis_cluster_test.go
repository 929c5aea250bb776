package ratelimit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/rueidis"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// clusterHandlerPrefix is a handler on c's first node, deny on error, with
// key_prefix prefix.
func clusterHandlerPrefix(t testing.TB, c *testredis.Cluster, prefix string, zones ...*Zone) *Handler {
	return provision(t, &Handler{Zones: zones, Store: &Store{Type: "redis", Redis: &RedisStore{
		Address: c.Nodes[0].Addr(), Timeout: caddy.Duration(2 * time.Second), OnError: "deny", KeyPrefix: prefix,
	}}}, nil)
}

func clusterHandler(t testing.TB, c *testredis.Cluster, zones ...*Zone) *Handler {
	return clusterHandlerPrefix(t, c, fmt.Sprintf("test-%d:", time.Now().UnixNano()), zones...)
}

// TestRedisClusterZonesOfDifferentKeys: on a Redis Cluster, zones with different
// keys limit together, exactly, because every key of one decision carries
// the hash tag of the first zone's key. Without it rueidis's cluster client
// panics (different slots) and every request fails.
func TestRedisClusterZonesOfDifferentKeys(t *testing.T) {
	c := testredis.StartCluster(t, 3)
	h := clusterHandler(t, c,
		&Zone{Name: "c-ip", Rate: "2/1m", Burst: new(int64(1))},
		&Zone{Name: "c-user", Key: "{http.request.header.X-User}", Rate: "3/1m", Burst: new(int64(2))},
		&Zone{Name: "c-path", Key: "{http.request.uri.path}", Rate: "100/1m", Burst: new(int64(50))},
	)
	passed := 0
	for range 6 {
		res := serve(t, h, "192.0.2.1", map[string]string{"X-User": "alice"})
		if res.passed {
			passed++
		} else if res.status != 429 {
			t.Fatalf("status %d, want 429 (a store error is 503 with on_error deny)", res.status)
		}
	}
	if passed != 2 {
		t.Fatalf("%d of 6 passed, want 2 (zone c-ip: burst 1 + 1)", passed)
	}
	// alice from another address: c-user has 3, 2 are used.
	if res := serve(t, h, "192.0.2.2", map[string]string{"X-User": "alice"}); !res.passed {
		t.Fatalf("alice from a second address: %d, want it passed (c-user has one left)", res.status)
	}
	if res := serve(t, h, "192.0.2.3", map[string]string{"X-User": "alice"}); res.passed || res.status != 429 {
		t.Fatalf("alice's fourth request: passed %v status %d, want 429 from c-user", res.passed, res.status)
	}
}

// TestRedisClusterRefusedCommandIsAnError: keys in different slots, which
// rueidis refuses with a panic, come back as an error.
func TestRedisClusterRefusedCommandIsAnError(t *testing.T) {
	c := testredis.StartCluster(t, 3)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	_, err = runScript(context.Background(), client, []string{"a", "b"}, []string{"1000", "0", "1000", "0"}, new(scriptReply))
	if err == nil || !strings.Contains(err.Error(), "slot") {
		t.Fatalf("script over keys a and b (different slots): %v, want the client's refusal as an error", err)
	}
}

func TestHashTagStable(t *testing.T) {
	// The tag must be the same on every node and every release: FNV-1a.
	if got, want := hashTag([]byte("a")), "e40c292c"; string(got[:]) != want {
		t.Fatalf("hashTag(a) = %s, want FNV-1a 32 %s", got, want)
	}
}
