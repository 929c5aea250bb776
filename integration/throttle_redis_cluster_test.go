package integration

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// TestThrottleRedisCluster: a Redis Cluster of 3 masters behind one address
// (rueidis finds the others). Two and three zones with different keys, whose
// keys therefore live in different slots, limit exactly and all-or-nothing;
// callers' keys spread over the nodes; a node killed mid-run is an error
// that on_error handles, never a panic, and the store recovers with it.
func TestThrottleRedisCluster(t *testing.T) {
	cl := testredis.StartCluster(t, 3)
	store := `
			store redis {
				address ` + cl.Nodes[0].Addr() + `
				timeout 2s
				on_error deny
			}`
	c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {
	handle /two {
		throttle {
			zone c2_caller {
				key {http.request.header.X-Caller}
				rate 3/1h
				burst 2
			}
			zone c2_net {
				key {http.request.header.X-Net}
				rate 5/1h
				burst 4
			}`+store+`
		}
		respond "ok"
	}
	handle /three {
		throttle {
			zone c3_caller {
				key {http.request.header.X-Caller}
				rate 3/1h
				burst 2
			}
			zone c3_net {
				key {http.request.header.X-Net}
				rate 5/1h
				burst 4
			}
			zone c3_path {
				key {http.request.uri.path}
				rate 9/1h
				burst 8
			}`+store+`
		}
		respond "ok"
	}
	handle /spread {
		throttle {
			zone c_spread {
				key {http.request.header.X-Caller}
				rate 1/1h
			}`+store+`
		}
		respond "ok"
	}
}`)
	client := c.Client()
	get := func(path, caller, network string) int {
		req, _ := http.NewRequest(http.MethodGet, c.URL(path), nil)
		req.Header.Set("X-Caller", caller)
		req.Header.Set("X-Net", network)
		resp, body := Do(t, client, req)
		if resp.StatusCode != 200 && resp.StatusCode != 429 {
			t.Fatalf("%s caller %s net %s: %d %q, want 200 or 429\n%s", path, caller, network, resp.StatusCode, body, grepLines(c.Logs(), "rate limit store"))
		}
		return resp.StatusCode
	}
	// expect sends n requests and checks how many passed.
	expect := func(path, caller, network string, n, want int) {
		t.Helper()
		passed := 0
		for range n {
			if get(path, caller, network) == 200 {
				passed++
			}
		}
		if passed != want {
			t.Fatalf("%s: %d of %d requests of caller %s from net %s passed, want %d", path, passed, n, caller, network, want)
		}
	}
	for _, path := range []string{"/two", "/three"} {
		// alice uses up her 3; the 3 rejected consume nothing of net n1
		// (5), which bob then uses up with 2 more; carol from n2 has her
		// own 3.
		expect(path, "alice", "n1", 6, 3)
		expect(path, "bob", "n1", 4, 2)
		expect(path, "carol", "n2", 4, 3)
	}
	// /three's path zone (9) counted only the 8 passes: one more passes.
	expect("/three", "dave", "n3", 2, 1)

	const callers = 90
	for i := range callers {
		if s := get("/spread", "spread-"+strconv.Itoa(i), "n"); s != 200 {
			t.Fatalf("spread caller %d: %d, want 200", i, s)
		}
	}
	var counts []string
	fewest := callers
	for i, s := range cl.Nodes {
		n, err := strconv.Atoi(testredis.Command(t, s.Addr(), "DBSIZE"))
		if err != nil {
			t.Fatal(err)
		}
		counts = append(counts, fmt.Sprintf("node %d: %d", i, n))
		fewest = min(fewest, n)
	}
	t.Logf("keys per node after %d callers on /spread and the zone tests: %s", callers, strings.Join(counts, ", "))
	if fewest < callers/10 {
		t.Fatalf("a node holds %d keys (%s): the keys do not spread over the cluster", fewest, strings.Join(counts, ", "))
	}

	// A node dies: the callers whose slot it served get on_error (deny:
	// 503), the others are decided as before until the breaker opens;
	// nothing panics.
	cl.Nodes[2].Stop()
	statuses := map[int]int{}
	for i := range 60 {
		req, _ := http.NewRequest(http.MethodGet, c.URL("/spread"), nil)
		req.Header.Set("X-Caller", "dead-"+strconv.Itoa(i))
		resp, _ := Do(t, client, req)
		statuses[resp.StatusCode]++
	}
	t.Logf("with node 2 down: statuses %v", statuses)
	if statuses[503] == 0 || statuses[200]+statuses[503] != 60 {
		t.Fatalf("with node 2 down: statuses %v, want only 200 and 503 (on_error deny), some 503", statuses)
	}
	if strings.Contains(c.Logs(), "panic") {
		t.Fatalf("Caddy logged a panic:\n%s", grepLines(c.Logs(), "panic"))
	}
	if m := c.Metrics(); strings.Contains(m, "caddy_throttle_store_errors_total 0") || !strings.Contains(m, "caddy_throttle_store_errors_total") {
		t.Fatalf("store errors not counted:\n%s", grepLines(m, "caddy_throttle_store"))
	}
	// Back on the same address, with its cluster config: every caller is
	// decided again.
	cl.Nodes[2].Restart()
	round := 0
	ok := WaitFor(t.Context(), 20*time.Second, func() bool {
		round++
		for i := range 20 {
			req, _ := http.NewRequest(http.MethodGet, c.URL("/spread"), nil)
			req.Header.Set("X-Caller", "back-"+strconv.Itoa(round)+"-"+strconv.Itoa(i))
			if resp, _ := Do(t, client, req); resp.StatusCode != 200 {
				time.Sleep(200 * time.Millisecond)
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("node 2 restarted: fresh callers still not all decided after 20s\n%s", grepLines(c.Logs(), "rate limit store"))
	}
}
