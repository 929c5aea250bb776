package ratelimit

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// leastPrivileges are the ACL rules docs/throttle.md gives for key_prefix
// acl: (plus, on a cluster, clusterPrivileges).
var leastPrivileges = []string{"on", ">pw", "resetkeys", "~acl:*", "resetchannels", "-@all", "+evalsha", "+eval", "+time", "+get", "+set"}

const clusterPrivileges = "+cluster|slots"

// warmed waits for the connect attempt that provisioning starts (warm), so
// that the next decision starts an attempt of its own: without it, a
// decision joins that attempt or follows it depending on timing, and a
// count of attempts is 1 or 2.
func warmed(h *Handler) *Handler {
	c := h.redis.conn
	c.mu.Lock()
	a := c.dialing
	c.mu.Unlock()
	if a != nil {
		<-a.done
	}
	return h
}

func aclUser(t testing.TB, addr, name string, rules ...string) {
	t.Helper()
	if r := testredis.Command(t, addr, append([]string{"ACL", "SETUSER", name}, rules...)...); r != "OK" {
		t.Fatalf("ACL SETUSER %s: %q", name, r)
	}
}

func aclHandler(t testing.TB, addrs string, user, zone string) *Handler {
	return provision(t, &Handler{
		Zones: []*Zone{{Name: zone, Rate: "1/1h"}},
		Store: &Store{Type: "redis", Redis: &RedisStore{Address: addrs, Username: user, Password: "pw", KeyPrefix: "acl:", Timeout: caddy.Duration(2 * time.Second), OnError: "deny"}},
	}, nil)
}

// TestRedisACLLeastPrivileges: the documented privileges are enough, on a
// single node and on a cluster; without one of them the connect probe
// reports NOPERM with the fix, counted.
func TestRedisACLLeastPrivileges(t *testing.T) {
	rs := testredis.Start(t)
	aclUser(t, rs.Addr(), "edge", leastPrivileges...)
	h := aclHandler(t, rs.Addr(), "edge", "r-acl")
	for i, want := range []bool{true, false} {
		if allowed, err := decideOnce(h); err != nil || allowed != want {
			t.Fatalf("decision %d with the least privileges: allowed %v, error %v; want %v", i, allowed, err, want)
		}
	}

	for _, missing := range []string{"+time", "+set", "+evalsha"} {
		var rules []string
		for _, r := range leastPrivileges {
			if r != missing {
				rules = append(rules, r)
			}
		}
		user := "no" + strings.TrimPrefix(missing, "+")
		aclUser(t, rs.Addr(), user, rules...)
		before := testutil.ToFloat64(throttleMetrics.connectErrors)
		h := warmed(aclHandler(t, rs.Addr(), user, "r-acl-"+user))
		_, err := decideOnce(h)
		if err == nil || !strings.Contains(err.Error(), "NOPERM") || !strings.Contains(err.Error(), "grant at least") {
			t.Fatalf("user without %s: %v, want NOPERM with the privileges to grant", missing, err)
		}
		// Two attempts, each counted once: provisioning's and the decision's.
		if n := testutil.ToFloat64(throttleMetrics.connectErrors) - before; n != 2 {
			t.Fatalf("user without %s: %v connect errors counted, want 2 (provisioning's attempt and the decision's)", missing, n)
		}
	}

	c := testredis.StartCluster(t, 3)
	for _, n := range c.Nodes {
		aclUser(t, n.Addr(), "edge", append(leastPrivileges, clusterPrivileges)...)
	}
	h = provision(t, &Handler{
		Zones: []*Zone{{Name: "r-acl-c1", Rate: "1/1h"}, {Name: "r-acl-c2", Key: "{http.request.header.X-User}", Rate: "1/1h"}},
		Store: &Store{Type: "redis", Redis: &RedisStore{Address: c.Nodes[0].Addr(), Username: "edge", Password: "pw", KeyPrefix: "acl:", Timeout: caddy.Duration(2 * time.Second), OnError: "deny"}},
	}, nil)
	if res := serve(t, h, "192.0.2.1", map[string]string{"X-User": "u"}); !res.passed {
		t.Fatalf("cluster, least privileges: %d, want passed", res.status)
	}
	// Rejected by the user zone: the address zone's slot is refunded (SET).
	if res := serve(t, h, "192.0.2.2", map[string]string{"X-User": "u"}); res.passed || res.status != 429 {
		t.Fatalf("cluster, least privileges, second request of user u: %d, want 429", res.status)
	}
	if res := serve(t, h, "192.0.2.2", map[string]string{"X-User": "v"}); !res.passed {
		t.Fatalf("cluster, least privileges: 192.0.2.2 as v: %d, want passed (refunded)", res.status)
	}
}

// TestRedisACLProbesEveryKeyPrefix: two handlers on one server and user,
// with different key prefixes, where the user may write only the first
// one's keys. The second handler's connect must report NOPERM with the fix
// for its own prefix, as it would alone, not share a connection whose
// probe checked only the first prefix.
func TestRedisACLProbesEveryKeyPrefix(t *testing.T) {
	rs := testredis.Start(t)
	aclUser(t, rs.Addr(), "edge", leastPrivileges...) // ~acl:*
	allowed := aclHandler(t, rs.Addr(), "edge", "r-prefix-a")
	if ok, err := decideOnce(allowed); err != nil || !ok {
		t.Fatalf("handler with key_prefix acl: allowed %v, error %v; want allowed", ok, err)
	}
	before := testutil.ToFloat64(throttleMetrics.connectErrors)
	other := warmed(provision(t, &Handler{
		Zones: []*Zone{{Name: "r-prefix-b", Rate: "1/1h"}},
		Store: &Store{Type: "redis", Redis: &RedisStore{Address: rs.Addr(), Username: "edge", Password: "pw", KeyPrefix: "other:", Timeout: caddy.Duration(2 * time.Second), OnError: "deny"}},
	}, nil))
	_, err := decideOnce(other)
	if err == nil || !strings.Contains(err.Error(), "NOPERM") || !strings.Contains(err.Error(), "~other:*") {
		t.Fatalf("handler with key_prefix other: the user may not write it: %v, want NOPERM naming ~other:*", err)
	}
	if n := testutil.ToFloat64(throttleMetrics.connectErrors) - before; n != 2 {
		t.Fatalf("%v connect errors counted, want 2 (provisioning's attempt and the decision's)", n)
	}
	if ok, err := decideOnce(allowed); err != nil || ok {
		t.Fatalf("handler with key_prefix acl, second decision: allowed %v, error %v; want refused by its own limit", ok, err)
	}
}
