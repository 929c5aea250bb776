package integration

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowOrigin is an origin whose /slow answers once open is called,
// /hang only when its request is canceled (Caddy cancels it when the
// client hangs up), and /fail by closing the connection (an upstream
// failure: reverse_proxy answers 502). inside counts the requests it is
// holding.
type slowOrigin struct {
	addr    string
	inside  atomic.Int64
	arrived chan struct{}
	gate    atomic.Pointer[chan struct{}] // closed: /slow answers
}

// open lets every /slow request held so far answer; later ones wait for
// the next open.
func (o *slowOrigin) open() {
	next := make(chan struct{})
	close(*o.gate.Swap(&next))
}

func startSlowOrigin(t *testing.T) *slowOrigin {
	o := &slowOrigin{arrived: make(chan struct{}, 1000)}
	first := make(chan struct{})
	o.gate.Store(&first)
	o.addr = Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			gate := *o.gate.Load()
			o.inside.Add(1)
			o.arrived <- struct{}{}
			select {
			case <-gate:
			case <-r.Context().Done():
			}
			o.inside.Add(-1)
			io.WriteString(w, "slow answer")
		case "/hang":
			o.inside.Add(1)
			o.arrived <- struct{}{}
			<-r.Context().Done()
			o.inside.Add(-1)
		case "/fail":
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		default:
			io.WriteString(w, "fast answer")
		}
	}))
	return o
}

// waitArrivals waits until n more requests reached the origin's held paths.
func (o *slowOrigin) waitArrivals(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-o.arrived:
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of %d requests reached the origin", i, n)
		}
	}
}

// inFlightMetric waits until caddy_throttle_in_flight{zone} reads want
// (the metric is the event: it changes when the handlers return).
func inFlightMetric(t *testing.T, c *Caddy, zone string, want string) {
	t.Helper()
	series := `caddy_throttle_in_flight{zone="` + zone + `"}`
	var got string
	if !WaitFor(t.Context(), 20*time.Second, func() bool {
		got, _ = metricValue(c.Metrics(), series)
		return got == want
	}) {
		t.Fatalf("%s = %q, want %s", series, got, want)
	}
}

// TestThrottleConcurrentUnderLoad: `concurrent 10` per caller, through a
// real Caddy in front of a slow origin, as nginx's limit_conn. 200 requests
// of one caller at once: exactly 10 reach the origin, 190 get 429 with
// Retry-After 1 while those are held, and another caller still gets in.
// Every slot is released however the requests end: answered, the clients
// hanging up mid-request, the upstream failing (502), and across a reload
// (the held requests end under the new config, which then has all its
// slots). After each, caddy_throttle_in_flight is back to 0 and 10 held
// requests fit again.
func TestThrottleConcurrentUnderLoad(t *testing.T) {
	const N, L = 200, 10
	o := startSlowOrigin(t)
	config := func(extra string) string {
		return `http://{$HOST}:{$HTTP_PORT} {
	throttle {
		zone in_flight {
			concurrent 10
		}
		` + extra + `
	}
	reverse_proxy ` + o.addr + `
	handle_errors 429 {
		respond "busy: {http.vars.throttle_rejected}" 429
	}
}`
	}
	c := StartCaddy(t, config(""))
	client := c.Client()

	// hold sends n requests to path at once and returns their statuses
	// once all have been answered (or the client gave up: status 0).
	hold := func(ctx context.Context, method, path string, n int, on429 func()) func() []int {
		statuses := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(ctx, method, c.URL(path), nil)
				resp, err := client.Do(req)
				if err != nil {
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				statuses[i] = resp.StatusCode
				if resp.StatusCode == 429 {
					if resp.Header.Get("Retry-After") != "1" || string(body) != "busy: in_flight" || !strings.HasPrefix(resp.Header.Get("RateLimit"), `"in_flight";r=0;pk=:`) {
						t.Errorf("429: Retry-After %q, body %q, RateLimit %q", resp.Header.Get("Retry-After"), body, resp.Header.Get("RateLimit"))
					}
					if on429 != nil {
						on429()
					}
				}
			})
		}
		return func() []int { wg.Wait(); return statuses }
	}
	count := func(statuses []int) map[int]int {
		m := map[int]int{}
		for _, s := range statuses {
			m[s]++
		}
		return m
	}
	// fill holds L requests at the origin and checks an L+1st is refused.
	fill := func(method string) func() []int {
		wait := hold(context.Background(), method, "/slow", L, nil)
		o.waitArrivals(t, L)
		if resp, _ := Get(t, client, c.URL("/")); resp.StatusCode != 429 {
			t.Fatalf("an 11th request while %d are held: %d, want 429", L, resp.StatusCode)
		}
		return wait
	}

	t.Run("200 at once", func(t *testing.T) {
		var refused atomic.Int64
		all := make(chan struct{})
		wait := hold(context.Background(), http.MethodGet, "/slow", N, func() {
			if refused.Add(1) == N-L {
				close(all)
			}
		})
		o.waitArrivals(t, L)
		select {
		case <-all:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d refused while %d are held", refused.Load(), N-L, L)
		}
		if n := o.inside.Load(); n != L {
			t.Fatalf("origin holds %d requests, want %d", n, L)
		}
		inFlightMetric(t, c, "in_flight", "10")
		other := c.ClientFrom(t, "127.0.0.9")
		if resp, body := Get(t, other, c.URL("/")); resp.StatusCode != 200 || body != "fast answer" {
			t.Fatalf("another caller while the first is full: %d %q", resp.StatusCode, body)
		}
		o.open()
		if got := count(wait()); got[200] != L || got[429] != N-L {
			t.Fatalf("statuses %v, want %d x 200 and %d x 429", got, L, N-L)
		}
		inFlightMetric(t, c, "in_flight", "0")
	})

	t.Run("HEAD holds a slot as GET does", func(t *testing.T) {
		wait := fill(http.MethodHead)
		o.open()
		if got := count(wait()); got[200] != L {
			t.Fatalf("HEAD statuses %v", got)
		}
		inFlightMetric(t, c, "in_flight", "0")
	})

	t.Run("clients hang up", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		wait := hold(ctx, http.MethodGet, "/hang", L, nil)
		o.waitArrivals(t, L)
		inFlightMetric(t, c, "in_flight", "10")
		cancel()
		wait()
		inFlightMetric(t, c, "in_flight", "0")
		if !WaitFor(t.Context(), 10*time.Second, func() bool { return o.inside.Load() == 0 }) {
			t.Fatalf("origin still holds %d hung requests", o.inside.Load())
		}
		wait = fill(http.MethodGet) // all 10 slots are free again
		o.open()
		wait()
		inFlightMetric(t, c, "in_flight", "0")
	})

	t.Run("upstream fails", func(t *testing.T) {
		statuses := hold(context.Background(), http.MethodGet, "/fail", N, nil)()
		if got := count(statuses); got[502]+got[429] != N || got[502] < L {
			t.Fatalf("statuses %v, want 502s (at least %d) and 429s only", got, L)
		}
		inFlightMetric(t, c, "in_flight", "0")
		wait := fill(http.MethodGet)
		o.open()
		wait()
		inFlightMetric(t, c, "in_flight", "0")
	})

	t.Run("reload while held", func(t *testing.T) {
		wait := fill(http.MethodGet)
		if status, body := c.Load(config("log_rejections warn")); status != 200 {
			t.Fatalf("reload: %d %s", status, body)
		}
		if resp, _ := Get(t, client, c.URL("/")); resp.StatusCode != 429 {
			t.Fatalf("after the reload, with %d still held: %d, want 429 (the new config sees the slots taken)", L, resp.StatusCode)
		}
		o.open()
		wait()
		inFlightMetric(t, c, "in_flight", "0")
		if v, _ := metricValue(c.Metrics(), `caddy_throttle_keys{zone="in_flight"}`); v != "0" {
			t.Fatalf("caddy_throttle_keys{zone=in_flight} = %q, want 0", v)
		}
		wait = fill(http.MethodGet)
		o.open()
		wait()
	})
}
