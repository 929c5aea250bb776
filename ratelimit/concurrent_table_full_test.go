package ratelimit

import (
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConcurrentTableFullSaysSo: a concurrent zone whose table is full
// (max_keys callers with a request in flight) refuses a new key; the
// refusal says what was enforced: RateLimit r=0 (not the free slots a key
// of its own would have) and a rule in the log naming the full table, not
// the per-key limit the caller never reached.
func TestConcurrentTableFullSaysSo(t *testing.T) {
	h := provision(t, &Handler{Zones: []*Zone{{Name: "conn-full", Concurrent: 1}}, Store: &Store{Type: "memory", MaxKeys: 64}}, nil)
	logs := observed(h)
	release := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(release); wg.Wait() }()
	// One request in flight per address until one is refused: 64 shards of
	// one key each, so at most 65 addresses.
	addr := netip.MustParseAddr("198.51.100.0")
	for range 65 {
		addr = addr.Next()
		inside, refused := make(chan struct{}), make(chan result, 1)
		wg.Go(func() {
			res := serveWith(t, h, addr.String(), nil, func(w http.ResponseWriter, r *http.Request) error {
				close(inside)
				<-release
				return nil
			})
			if !res.passed {
				refused <- res
			}
		})
		select {
		case <-inside:
			continue
		case res := <-refused:
			if res.status != 429 {
				t.Fatalf("new key in a full table: %d, want 429", res.status)
			}
			if got := stripPK(res.header.Get("RateLimit")); got != `"conn-full";r=0` {
				t.Fatalf("RateLimit %q for a key the full table refused, want r=0", got)
			}
			rej := logs.FilterMessage("rejected").All()
			if len(rej) != 1 {
				t.Fatalf("%d rejection lines, want 1", len(rej))
			}
			if rule, _ := rej[0].ContextMap()["rule"].(string); !strings.Contains(rule, "max_keys") || !strings.Contains(rule, "full") {
				t.Fatalf("rule %q, want one that says the key table is full (max_keys)", rule)
			}
			return
		case <-time.After(10 * time.Second):
			t.Fatal("a request neither reached the route nor was refused")
		}
	}
	t.Fatal("65 keys in flight in a table of 64: none refused")
}
