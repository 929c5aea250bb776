package ratelimit

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// BenchmarkRedisStore: decisions per second of the Redis store, many
// concurrent callers (b.RunParallel, GOMAXPROCS goroutines x 16), against a
// single node, a 3-master cluster, and a single node over TLS, in one run:
//
//	EDGEKIT_REQUIRE_REDIS=1 go test -run '^$' -bench BenchmarkRedisStore -benchtime 3s ./ratelimit/
func BenchmarkRedisStore(b *testing.B) {
	ca := testredis.NewCA(b, "bench")
	single := testredis.Start(b)
	cluster := testredis.StartCluster(b, 3)
	secure := testredis.StartTLS(b, ca, false)
	sameKey := []*Zone{{Name: "b-ip", Rate: "1000000/1s", Burst: new(int64(1000))}, {Name: "b-ip-slow", Rate: "1000000/1m", Burst: new(int64(1000))}}
	twoKeys := []*Zone{{Name: "b-ip2", Rate: "1000000/1s", Burst: new(int64(1000))}, {Name: "b-user", Key: "{http.request.header.X-User}", Rate: "1000000/1s", Burst: new(int64(1000))}}
	for _, tc := range []struct {
		name  string
		addr  string
		tls   *RedisTLS
		zones []*Zone
	}{
		{"single/1zone", single.Addr(), nil, sameKey[:1]},
		{"cluster/1zone", cluster.Nodes[0].Addr(), nil, sameKey[:1]},
		{"tls/1zone", secure.Addr(), &RedisTLS{CA: ca.File}, sameKey[:1]},
		{"single/2zones-samekey", single.Addr(), nil, sameKey},
		{"cluster/2zones-samekey", cluster.Nodes[0].Addr(), nil, sameKey},
		{"single/2zones-twokeys", single.Addr(), nil, twoKeys},
		{"cluster/2zones-twokeys", cluster.Nodes[0].Addr(), nil, twoKeys},
	} {
		b.Run(tc.name, func(b *testing.B) {
			zones := make([]*Zone, len(tc.zones))
			for i, z := range tc.zones {
				zc := *z
				zc.Name += "-" + tc.name
				zones[i] = &zc
			}
			h := provision(b, &Handler{Zones: zones, Store: &Store{Type: "redis", Redis: &RedisStore{
				Address: tc.addr, TLS: tc.tls, Timeout: caddy.Duration(5 * time.Second), OnError: "deny",
				KeyPrefix: "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":",
			}}}, nil)
			var out [2]outcome
			if _, err := h.redis.decide(context.Background(), keysFor(len(zones), 0), out[:len(zones)], nil, allZones); err != nil {
				b.Fatal(err)
			}
			var seq atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				var out [2]outcome
				for pb.Next() {
					n := seq.Add(1)
					if _, err := h.redis.decide(context.Background(), keysFor(len(zones), n%10000), out[:len(zones)], nil, allZones); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
		})
	}
}

// keysFor is caller n's request keys: an address and, for a second zone, a
// user name.
func keysFor(zones int, n int64) []requestKey {
	k := []requestKey{{text: "10.0." + strconv.FormatInt(n/256, 10) + "." + strconv.FormatInt(n%256, 10)}, {text: "user-" + strconv.FormatInt(n, 10)}}
	return k[:zones]
}
