package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// TestRedisBreakerVisible: while the breaker is open the gauge says so, and
// each opening is one warning; a failed probe is no new opening; closing
// sets the gauge back and is logged.
func TestRedisBreakerVisible(t *testing.T) {
	rs := testredis.Start(t)
	h := redisHandler(t, rs, "allow", &Zone{Name: "r-breaker", Rate: "100/1s", Burst: new(int64(100))})
	core, logs := observer.New(zapcore.DebugLevel)
	h.redis.logger = zap.New(core)
	gauge := func() float64 { return testutil.ToFloat64(throttleMetrics.breakerOpen) }
	opened := func() int { return logs.FilterMessageSnippet("redis breaker opened").Len() }
	decide := func() error {
		var out [1]outcome
		_, err := h.redis.decide(context.Background(), []requestKey{{text: "k"}}, out[:], nil, allZones)
		return err
	}
	if err := decide(); err != nil || gauge() != 0 {
		t.Fatalf("healthy: error %v, gauge %v", err, gauge())
	}
	rs.Stop()
	for range 10 {
		if decide() == nil {
			t.Fatal("decided with Redis down")
		}
	}
	if gauge() != 1 || opened() != 1 {
		t.Fatalf("after 10 failures: gauge %v, %d opening warnings, want 1 and 1", gauge(), opened())
	}
	if e := logs.FilterMessageSnippet("redis breaker opened").All()[0]; e.Level != zapcore.WarnLevel {
		t.Fatalf("opening logged at %v, want warn", e.Level)
	}
	time.Sleep(breakerCooldown + 50*time.Millisecond)
	if decide() == nil { // the probe, failing: still open
		t.Fatal("probe decided with Redis down")
	}
	if gauge() != 1 || opened() != 1 {
		t.Fatalf("after a failed probe: gauge %v, %d opening warnings, want 1 and 1 (no new opening)", gauge(), opened())
	}
	rs.Restart()
	time.Sleep(breakerCooldown + 50*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for decide() != nil {
		if time.Now().After(deadline) {
			t.Fatal("Redis back: decisions still failing after 10s")
		}
		time.Sleep(breakerCooldown + 50*time.Millisecond)
	}
	if gauge() != 0 || logs.FilterMessageSnippet("redis breaker closed").Len() != 1 {
		t.Fatalf("recovered: gauge %v, %d closing lines, want 0 and 1", gauge(), logs.FilterMessageSnippet("redis breaker closed").Len())
	}
	rs.Stop()
	for range 3 {
		_ = decide()
	}
	if gauge() != 1 || opened() != 2 {
		t.Fatalf("second outage: gauge %v, %d opening warnings, want 1 and 2", gauge(), opened())
	}
}
