package testredis

import (
	"strings"
	"testing"
)

func TestStartCluster(t *testing.T) {
	c := StartCluster(t, 3)
	for _, s := range c.Nodes {
		if info := Command(t, s.Addr(), "CLUSTER", "INFO"); !strings.Contains(info, "cluster_slots_assigned:16384") || !strings.Contains(info, "cluster_known_nodes:3") {
			t.Fatalf("node %s: %s", s.Addr(), info)
		}
	}
	// A key lands on the node owning its slot; the others redirect.
	moved := 0
	for _, s := range c.Nodes {
		if r := Command(t, s.Addr(), "SET", "k", "v"); strings.HasPrefix(r, "MOVED") {
			moved++
		} else if r != "OK" {
			t.Fatalf("SET on %s: %q", s.Addr(), r)
		}
	}
	if moved != 2 {
		t.Fatalf("%d of 3 nodes redirected SET k, want 2", moved)
	}
}
