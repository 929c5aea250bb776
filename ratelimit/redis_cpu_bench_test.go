package ratelimit

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// BenchmarkRedisDecisionCPU is what a Redis decision costs in CPU, which on
// a machine whose cores Caddy shares with redis-server is what end-to-end
// requests/s follows: this process's CPU (rusage: the client, its pipe
// goroutines, the benchmark's loop) and redis-server's (INFO cpu) per
// decision, with 64 concurrent callers (wrk -c64's many requests in flight,
// random callers); and, with one caller at a time, the decision's latency
// (p50, p99):
//
//	EDGEKIT_REQUIRE_REDIS=1 go test -run '^$' -bench BenchmarkRedisDecisionCPU -benchtime 100000x ./ratelimit/
func BenchmarkRedisDecisionCPU(b *testing.B) {
	rs := testredis.Start(b)
	h := provision(b, &Handler{Zones: []*Zone{{Name: "b-cpu", Rate: "1000000/1s", Burst: new(int64(1000))}}, Store: &Store{Type: "redis", Redis: &RedisStore{
		Address: rs.Addr(), Timeout: caddy.Duration(5 * time.Second), OnError: "deny",
		KeyPrefix: "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":",
	}}}, nil)
	var seq atomic.Int64
	decide := func(b *testing.B) {
		var out [1]outcome
		n := seq.Add(1)
		keys := [1]requestKey{{text: "10." + strconv.FormatInt(n>>16&255, 10) + "." + strconv.FormatInt(n>>8&255, 10) + "." + strconv.FormatInt(n&255, 10)}}
		if _, err := h.redis.decide(context.Background(), keys[:], out[:], nil, allZones); err != nil {
			b.Error(err)
		}
	}
	for range 100 { // connect and load the script
		decide(b)
	}
	b.Run("concurrent", func(b *testing.B) {
		cpu0, srv0 := processCPU(), redisCPU(b, rs.Addr())
		b.SetParallelism(32) // x GOMAXPROCS 2 on the test machine: 64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				decide(b)
			}
		})
		b.StopTimer()
		n := float64(b.N)
		b.ReportMetric(float64(processCPU()-cpu0)/1e3/n, "client-µs/op")
		b.ReportMetric(float64(redisCPU(b, rs.Addr())-srv0)/1e3/n, "server-µs/op")
	})
	b.Run("one-caller", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t := time.Now()
			decide(b)
			lat = append(lat, time.Since(t))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	})
}

// processCPU is this process's user and system CPU so far, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// redisCPU is the redis-server's user and system CPU so far, in ns (INFO cpu).
func redisCPU(t testing.TB, addr string) int64 {
	var total float64
	for line := range strings.SplitSeq(testredis.Command(t, addr, "INFO", "cpu"), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("INFO cpu %s: %v", line, err)
			}
			total += f
		}
	}
	return int64(total * 1e9)
}
