package ratelimit

import (
	"strconv"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// TestRateIsBucketOfN: `rate 1000/10h` without burst lets 1000 requests
// through at once and refuses the 1001st with Retry-After 36 (one refill),
// as its RateLimit-Policy q=1000;w=36000 says; `burst 0` keeps strict
// spacing (the second request waits 36 s). Before the default burst was
// n-1, the second request of `rate 1000/10h` got 429 while the policy
// announced 1000. The memory store, a Redis and a Redis Cluster agree on
// every decision. Redis runs on the real clock: the refill has run on for
// as long as the 1000 requests took, so the 1001st may wait that much less
// (a cluster under -race took 3 s, which a 3.6 s refill did not absorb).
func TestRateIsBucketOfN(t *testing.T) {
	stores := map[string]func(t *testing.T, zones ...*Zone) *Handler{
		"memory": func(t *testing.T, zones ...*Zone) *Handler {
			return memoryHandler(t, &fakeClock{ns: int64(time.Hour)}, zones...)
		},
		"redis": func(t *testing.T, zones ...*Zone) *Handler {
			return redisHandler(t, testredis.Start(t), "deny", zones...)
		},
		"cluster": func(t *testing.T, zones ...*Zone) *Handler {
			return redisHandler(t, testredis.StartCluster(t, 3).Nodes[0], "deny", zones...)
		},
	}
	for name, newHandler := range stores {
		t.Run(name, func(t *testing.T) {
			h := newHandler(t, &Zone{Name: "bucket-" + name, Rate: "1000/10h"})
			start := time.Now()
			for i := range 1000 {
				res := serve(t, h, "192.0.2.1", nil)
				if !res.passed {
					t.Fatalf("request %d of 1000 refused: %d, Retry-After %q", i+1, res.status, res.header.Get("Retry-After"))
				}
				if i == 0 {
					if got, want := stripPK(res.header.Get("RateLimit-Policy")), `"bucket-`+name+`";q=1000;w=36000`; got != want {
						t.Fatalf("RateLimit-Policy %q, want %q", got, want)
					}
				}
				if got, want := stripPK(res.header.Get("RateLimit")), `"bucket-`+name+`";r=`+strconv.Itoa(999-i)+`;t=`; len(got) < len(want) || got[:len(want)] != want {
					t.Fatalf("request %d: RateLimit %q, want prefix %q", i+1, got, want)
				}
			}
			res := serve(t, h, "192.0.2.1", nil)
			// One refill is 36 s; at least 36 s less the time spent (rounded up).
			least := 36 - int(time.Since(start)/time.Second)
			if ra, err := strconv.Atoi(res.header.Get("Retry-After")); res.passed || res.status != 429 || err != nil || ra < least || ra > 36 {
				t.Fatalf("request 1001 after %v: passed %v, %d, Retry-After %q; want 429 with Retry-After %d..36", time.Since(start), res.passed, res.status, res.header.Get("Retry-After"), least)
			}
			// burst 0: strict spacing, one request per 36 s.
			hs := newHandler(t, &Zone{Name: "strict-" + name, Rate: "1000/10h", Burst: new(int64(0))})
			if res := serve(t, hs, "192.0.2.2", nil); !res.passed || stripPK(res.header.Get("RateLimit-Policy")) != `"strict-`+name+`";q=1000;w=36000` {
				t.Fatalf("strict zone, first request: passed %v, %d, RateLimit-Policy %q", res.passed, res.status, res.header.Get("RateLimit-Policy"))
			}
			if res := serve(t, hs, "192.0.2.2", nil); res.passed || res.header.Get("Retry-After") != "36" {
				t.Fatalf("strict zone (burst 0), second request: passed %v, Retry-After %q; want 429 with Retry-After 36", res.passed, res.header.Get("Retry-After"))
			}
		})
	}
}
