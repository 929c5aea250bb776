package integration

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// rateLimitPolicy is one RateLimit-Policy member as draft-ietf-httpapi-
// ratelimit-headers-10 writes it: name, q, w and a 12-byte pk.
var rateLimitPolicy = regexp.MustCompile(`^"[^"]*";q=[0-9]+;w=[0-9]+;pk=:[A-Za-z0-9+/]{16}:$`)

// TestThrottleEnforce: a real origin behind reverse_proxy sees only what the
// limit lets through; rejections go through handle_errors with Retry-After
// and the RateLimit headers, over HTTP/1.1, HTTP/2 and HTTP/3.
func TestThrottleEnforce(t *testing.T) {
	var originHits atomic.Int64
	origin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Caller") == "test" {
			originHits.Add(1)
		}
		io.WriteString(w, "from origin")
	}))
	// One caller, named by a header, across both sites and all protocols.
	site := `{
	throttle {
		zone per_caller {
			key {http.request.header.X-Caller}
			rate 3/1m
			burst 2
		}
	}
	reverse_proxy ` + origin + `
	handle_errors 429 {
		respond "slow down: {err.status_code}" 429
	}
}`
	c := StartCaddy(t, "http://{$HOST}:{$HTTP_PORT} "+site+"\nhttps://localhost:{$HTTPS_PORT} {\n\ttls internal\n"+strings.TrimPrefix(site, "{"))
	c.WaitHTTPS(t)

	for _, tc := range []struct {
		name   string
		client *http.Client
		url    string
	}{
		{"h1", c.Client(), c.URL("/")},
		{"h2", c.Client(), c.HTTPSURL("/")},
		{"h3", c.H3Client(), c.HTTPSURL("/")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One budget of 3: h1 uses it up, every later request is
			// rejected.
			if tc.name == "h1" {
				for i := range 3 {
					resp, body := Get(t, tc.client, tc.url, "X-Caller", "test")
					if resp.StatusCode != 200 || body != "from origin" {
						t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
					}
					p := resp.Header.Get("RateLimit-Policy")
					if !rateLimitPolicy.MatchString(p) || !strings.HasPrefix(p, `"per_caller";q=3;w=60;pk=:`) {
						t.Fatalf("RateLimit-Policy %q", p)
					}
					if strings.Contains(p, "test") || !strings.HasSuffix(resp.Header.Get("RateLimit"), p[strings.Index(p, ";pk="):]) {
						t.Fatalf("pk: RateLimit-Policy %q, RateLimit %q: want one keyed hash on both, not the key", p, resp.Header.Get("RateLimit"))
					}
					if rl, want := resp.Header.Get("RateLimit"), `"per_caller";r=`+strconv.Itoa(2-i)+`;t=`; !strings.HasPrefix(rl, want) {
						t.Fatalf("RateLimit %q, want prefix %q", rl, want)
					}
				}
			}
			resp, body := Get(t, tc.client, tc.url, "X-Caller", "test")
			if resp.StatusCode != 429 || body != "slow down: 429" {
				t.Fatalf("over the limit: %d %q, want 429 from handle_errors", resp.StatusCode, body)
			}
			if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 20 {
				t.Fatalf("Retry-After %q, want whole seconds in 1..20", resp.Header.Get("Retry-After"))
			}
			if rl := resp.Header.Get("RateLimit"); !strings.HasPrefix(rl, `"per_caller";r=0;t=`) {
				t.Fatalf("RateLimit on the rejection %q", rl)
			}
		})
	}
	if n := originHits.Load(); n != 3 {
		t.Fatalf("origin saw %d requests, want 3", n)
	}
	if m := c.Metrics(); !strings.Contains(m, `caddy_throttle_requests_total{decision="rejected",zone="per_caller"} 3`) {
		t.Fatalf("metrics do not count the 3 rejections:\n%s", grepLines(m, "caddy_throttle"))
	}
}

// TestThrottleObserve: observe lets everything through but counts and logs
// what it would have rejected.
func TestThrottleObserve(t *testing.T) {
	origin := EchoOrigin(t)
	c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {
	throttle {
		zone watch {
			rate 1/1m
		}
		mode observe
	}
	reverse_proxy `+origin+`
}`)
	for i := range 5 {
		if resp, _ := Get(t, c.Client(), c.URL("/")); resp.StatusCode != 200 {
			t.Fatalf("observe rejected request %d: %d", i, resp.StatusCode)
		}
	}
	if m := c.Metrics(); !strings.Contains(m, `caddy_throttle_requests_total{decision="observed",zone="watch"} 4`) {
		t.Fatalf("observed requests not counted:\n%s", grepLines(m, "caddy_throttle"))
	}
	if n := strings.Count(c.Logs(), "would reject (observe mode)"); n != 4 {
		t.Fatalf("%d would-reject log lines, want 4", n)
	}
}

// TestThrottleReload: a reload that changes the rate keeps every caller's
// state; a bad config is refused and the old one keeps limiting.
func TestThrottleReload(t *testing.T) {
	config := func(rate string) string {
		return `http://{$HOST}:{$HTTP_PORT} {
	throttle {
		zone reload {
			rate ` + rate + `
			burst 0
		}
	}
	respond "ok"
}`
	}
	c := StartCaddy(t, config("2/1h"))
	// burst 0 (strict spacing): one request, then one every 30 minutes.
	for i, want := range []int{200, 429} {
		if resp, _ := Get(t, c.Client(), c.URL("/")); resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	// 2/1h -> 60/1h: a fresh budget would allow a request now; the kept
	// TAT (half an hour ahead) does not.
	if status, body := c.Load(config("60/1h")); status != 200 {
		t.Fatalf("reload: %d %s", status, body)
	}
	resp, _ := Get(t, c.Client(), c.URL("/"))
	if resp.StatusCode != 429 {
		t.Fatalf("after reload: %d: the caller's state was lost", resp.StatusCode)
	}
	if p := resp.Header.Get("RateLimit-Policy"); !strings.HasPrefix(p, `"reload";q=60;w=3600;pk=:`) {
		t.Fatalf("new rate not in effect: RateLimit-Policy %q", p)
	}
	status, body := c.Load(config("0/1h"))
	if status == 200 || !strings.Contains(body, "request count must be") {
		t.Fatalf("bad config: %d %q, want a refusal", status, body)
	}
	resp, _ = Get(t, c.Client(), c.URL("/"))
	if resp.StatusCode != 429 || !strings.HasPrefix(resp.Header.Get("RateLimit-Policy"), `"reload";q=60;w=3600;pk=:`) {
		t.Fatalf("after a refused reload: %d %q, want the running config still limiting", resp.StatusCode, resp.Header.Get("RateLimit-Policy"))
	}
}

// TestThrottleRedisTwoNodes: two Caddy processes limit one caller together
// through Redis, exactly: over a run, what they let through together is
// what one GCRA allows for its duration, within one request.
func TestThrottleRedisTwoNodes(t *testing.T) {
	rs := testredis.Start(t)
	config := `http://{$HOST}:{$HTTP_PORT} {
	throttle {
		zone fleet {
			rate 5/s
			burst 3
		}
		store redis {
			address ` + rs.Addr() + `
			# A timeout would let a request through (allow) or answer 503
			# (deny) after Redis may have counted it: make it one that
			# never fires, and deny so that it would show.
			timeout 10s
			on_error deny
		}
	}
	respond "ok"
}`
	nodes := []*Caddy{StartCaddy(t, config), StartCaddy(t, config)}
	const run = 3 * time.Second
	const interval = 200 * time.Millisecond
	var passed [2]atomic.Int64
	// A pass was decided by Redis somewhere between its send and its
	// receipt: bound the window between the first and last decisions from
	// both sides, so a loaded machine widens the bounds instead of failing.
	var mu sync.Mutex
	var minSent, minRecv, maxSent, maxRecv int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range 6 {
		node := w % 2
		wg.Go(func() {
			client := nodes[node].Client()
			for time.Since(start) < run {
				sent := time.Now().UnixNano()
				resp, err := client.Get(nodes[node].URL("/"))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				recv := time.Now().UnixNano()
				switch resp.StatusCode {
				case 200:
					passed[node].Add(1)
					mu.Lock()
					if minSent == 0 {
						minSent, minRecv = sent, recv
					}
					minSent, minRecv = min(minSent, sent), min(minRecv, recv)
					maxSent, maxRecv = max(maxSent, sent), max(maxRecv, recv)
					mu.Unlock()
				case 429:
				default:
					t.Errorf("node %d: status %d", node, resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	total := passed[0].Load() + passed[1].Load()
	// burst 3 lets 4 through at once, then one per interval.
	longest := time.Duration(maxRecv - minSent)
	shortest := max(0, time.Duration(maxSent-minRecv))
	wantMax := int64(3+1) + int64(longest/interval)
	wantMin := int64(3+1) + int64(shortest/interval)
	t.Logf("two nodes let through %d + %d = %d in %v..%v; GCRA allows %d..%d",
		passed[0].Load(), passed[1].Load(), total, shortest, longest, wantMin, wantMax)
	if total < wantMin-1 || total > wantMax+1 {
		t.Fatalf("two nodes let through %d, want %d..%d ± 1", total, wantMin, wantMax)
	}
	if passed[0].Load() == 0 || passed[1].Load() == 0 {
		t.Fatalf("one node let nothing through: %d, %d", passed[0].Load(), passed[1].Load())
	}
}

// TestThrottleRedisOutage: Redis killed mid-run. on_error allow keeps
// requests flowing with bounded latency; deny answers 503 with Retry-After;
// limiting resumes once Redis is back.
func TestThrottleRedisOutage(t *testing.T) {
	rs := testredis.Start(t)
	c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {
	handle /allow {
		throttle {
			zone outage_allow {
				rate 1/1h
			}
			store redis {
				address `+rs.Addr()+`
				timeout 100ms
				on_error allow
			}
		}
		respond "ok"
	}
	handle /deny {
		throttle {
			zone outage_deny {
				rate 1/1h
			}
			store redis {
				address `+rs.Addr()+`
				timeout 100ms
				on_error deny
			}
		}
		respond "ok"
	}
}`)
	client := c.Client()
	status := func(path string) (int, *http.Response, time.Duration) {
		start := time.Now()
		resp, _ := Get(t, client, c.URL(path))
		return resp.StatusCode, resp, time.Since(start)
	}
	for _, p := range []string{"/allow", "/deny"} {
		if s, _, _ := status(p); s != 200 {
			t.Fatalf("%s first request: %d", p, s)
		}
		if s, _, _ := status(p); s != 429 {
			t.Fatalf("%s second request: %d, want 429 while Redis is up", p, s)
		}
	}
	rs.Stop()
	var slowest time.Duration
	for i := range 50 {
		s, _, took := status("/allow")
		if s != 200 {
			t.Fatalf("on_error allow, Redis down, request %d: %d", i, s)
		}
		slowest = max(slowest, took)
	}
	t.Logf("slowest of 50 requests with Redis down (timeout 100ms): %v", slowest)
	if slowest > time.Second {
		t.Fatalf("a request took %v with Redis down: the timeout and breaker do not bound latency", slowest)
	}
	s, resp, _ := status("/deny")
	if s != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("on_error deny with Redis down: %d Retry-After %q, want 503 with Retry-After", s, resp.Header.Get("Retry-After"))
	}
	rs.Restart()
	if !WaitFor(t.Context(), 10*time.Second, func() bool {
		s, _, _ := status("/allow")
		return s == 429
	}) {
		t.Fatal("limiting did not resume after Redis came back")
	}
	if m := c.Metrics(); !strings.Contains(m, "caddy_throttle_store_errors_total") {
		t.Fatalf("store errors not counted:\n%s", grepLines(m, "caddy_throttle"))
	}
}
