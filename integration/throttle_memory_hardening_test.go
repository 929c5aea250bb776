package integration

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestThrottleRefusedLoadKeepsZone: a /load that shares a memory zone with
// the running config and shrinks it (store memory 64), and is then refused
// because a later module fails to provision, changes nothing that serves
// traffic: the zone keeps every key, evicts none, and a caller over its
// limit stays limited. A /load that succeeds does shrink it.
func TestThrottleRefusedLoadKeepsZone(t *testing.T) {
	config := func(store, broken string) string {
		return `http://{$HOST}:{$HTTP_PORT} {
	throttle {
		zone shared {
			key {http.request.header.X-Caller}
			rate 1/1h
		}
		` + store + `
	}
	` + broken + `
	respond "ok"
}`
	}
	// A handler that fails at provision, after throttle (ordered before it
	// in the same site) has provisioned: its client certificate is missing.
	const broken = `handle /broken {
		reverse_proxy 127.0.0.1:9 {
			transport http {
				tls_client_auth /nonexistent/edgekit-client.pem /nonexistent/edgekit-client.key
			}
		}
	}`
	c := StartCaddy(t, config("store memory 100000", ""))
	client := c.Client()
	call := func(caller string) int {
		t.Helper()
		resp, body := Get(t, client, c.URL("/"), "X-Caller", caller)
		if resp.StatusCode != 200 && resp.StatusCode != 429 {
			t.Fatalf("caller %s: %d %q, want 200 or 429", caller, resp.StatusCode, body)
		}
		return resp.StatusCode
	}
	fill := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			if s := call(prefix + strconv.Itoa(i)); s != 200 {
				t.Fatalf("new caller %s%d: %d, want 200", prefix, i, s)
			}
		}
	}
	fill("before-", 300)
	if s := call("victim"); s != 200 {
		t.Fatalf("victim's first request: %d", s)
	}
	if s := call("victim"); s != 429 {
		t.Fatalf("victim's second request: %d, want 429", s)
	}

	status, body := c.Load(config("store memory 64", broken))
	if status == 200 || !strings.Contains(body, "edgekit-client") {
		t.Fatalf("broken config: %d %q, want it refused for the missing certificate", status, body)
	}
	// Many new callers: with the refused bound in force, each would evict.
	fill("after-", 600)
	if s := call("victim"); s != 429 {
		t.Fatalf("victim over its limit after the refused /load: %d, want 429 (its key was dropped)", s)
	}
	keys, evictions := zoneGauges(t, c, "shared")
	if keys != 901 || evictions != 0 {
		t.Fatalf("after the refused /load the zone holds %d keys with %d evictions, want 901 and 0", keys, evictions)
	}

	// The same shrink in a config that loads takes hold.
	if status, body := c.Load(config("store memory 64", "")); status != 200 {
		t.Fatalf("reload: %d %s", status, body)
	}
	// A shard shrinks when a key is inserted into it: 1000 new callers
	// reach all 64 shards (a shard is missed with probability 1.5e-7).
	fill("shrunk-", 1000)
	keys, evictions = zoneGauges(t, c, "shared")
	if keys > 64 || evictions == 0 {
		t.Fatalf("after a good /load with store memory 64 the zone holds %d keys with %d evictions, want at most 64 and some", keys, evictions)
	}
}

// zoneGauges reads a memory zone's caddy_throttle_keys and
// caddy_throttle_evictions_total from the admin endpoint.
func zoneGauges(t *testing.T, c *Caddy, zone string) (keys, evictions int) {
	t.Helper()
	m := c.Metrics()
	read := func(metric string) int {
		re := regexp.MustCompile(`(?m)^` + metric + `\{zone="` + regexp.QuoteMeta(zone) + `"\} (\d+)$`)
		sub := re.FindStringSubmatch(m)
		if sub == nil {
			t.Fatalf("no %s for zone %s in metrics:\n%s", metric, zone, grepLines(m, "caddy_throttle"))
		}
		n, _ := strconv.Atoi(sub[1])
		return n
	}
	return read("caddy_throttle_keys"), read("caddy_throttle_evictions_total")
}
