package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// TestThrottleRedisBreakerVisible: with Redis gone and on_error allow,
// requests keep passing; an operator sees the open breaker without debug
// logs: the gauge caddy_throttle_store_breaker_open is 1 and one warning
// says it opened, however many requests follow. Redis back, the gauge goes
// back to 0.
func TestThrottleRedisBreakerVisible(t *testing.T) {
	rs := testredis.Start(t)
	c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {
	throttle {
		zone breaker_vis {
			rate 1000/1s
			burst 1000
		}
		store redis {
			address `+rs.Addr()+`
			timeout 500ms
			on_error allow
		}
	}
	respond "ok"
}`)
	client := c.Client()
	gauge := func() string {
		if v, ok := metricValue(c.Metrics(), "caddy_throttle_store_breaker_open"); ok {
			return v
		}
		return "absent"
	}
	if resp, _ := Get(t, client, c.URL("/")); resp.StatusCode != 200 {
		t.Fatalf("healthy: %d", resp.StatusCode)
	}
	if g := gauge(); g != "0" {
		t.Fatalf("healthy: gauge %s, want 0", g)
	}
	rs.Stop()
	for i := range 30 {
		if resp, _ := Get(t, client, c.URL("/")); resp.StatusCode != 200 {
			t.Fatalf("Redis down, request %d: %d, want 200 (on_error allow)", i, resp.StatusCode)
		}
	}
	if g := gauge(); g != "1" {
		t.Fatalf("Redis down after 30 requests: gauge %s, want 1", g)
	}
	opened := grepLines(c.Logs(), "redis breaker opened")
	if n := strings.Count(opened, "redis breaker opened"); n != 1 || !strings.Contains(strings.ToLower(opened), "warn") {
		t.Fatalf("%d opening lines, want 1 at warn level:\n%s", n, opened)
	}
	rs.Restart()
	if !WaitFor(t.Context(), 15*time.Second, func() bool {
		Get(t, client, c.URL("/"))
		return gauge() == "0"
	}) {
		t.Fatalf("Redis back: gauge still %s after 15s", gauge())
	}
	if !strings.Contains(c.Logs(), "redis breaker closed") {
		t.Fatalf("closing not logged:\n%s", grepLines(c.Logs(), "redis breaker"))
	}
}
