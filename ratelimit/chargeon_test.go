package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// serveNext is serveWith without headers.
func serveNext(t testing.TB, h *Handler, clientIP string, next caddyhttp.HandlerFunc) result {
	t.Helper()
	return serveWith(t, h, clientIP, nil, next)
}

// login answers like a login form: 200 for the right password, 401
// written for a wrong one, or (asError) 401 returned as an error the way
// basic_auth does, for handle_errors to write.
func login(ok, asError bool) caddyhttp.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		switch {
		case ok:
			w.Write([]byte("welcome"))
		case asError:
			return caddyhttp.Error(http.StatusUnauthorized, errors.New("bad password"))
		default:
			w.WriteHeader(http.StatusUnauthorized)
		}
		return nil
	}
}

func loginZone(name string) *Zone {
	return &Zone{Name: name, Rate: "5/10m", Burst: new(int64(4)), ChargeOn: &ChargeOn{Status: []int{401, 403}}}
}

// checkLoginScenario: five failed logins per ten minutes per address;
// successful logins are free, and an address over the limit is refused up
// front, right password or not. advance moves the store's clock on.
func checkLoginScenario(t *testing.T, h *Handler, ip string, advance func(time.Duration)) {
	t.Helper()
	for i := range 20 {
		if res := serveNext(t, h, ip, login(true, false)); res.status != 200 {
			t.Fatalf("successful login %d: %d, want 200 (successes are free)", i+1, res.status)
		}
	}
	for i := range 5 {
		if res := serveNext(t, h, ip, login(false, i%2 == 1)); !res.passed || res.status != 401 {
			t.Fatalf("failed login %d: passed %v, status %d, want 401 from the login", i+1, res.passed, res.status)
		}
	}
	for i, ok := range []bool{false, true, false} {
		res := serveNext(t, h, ip, login(ok, false))
		if res.passed || res.status != 429 {
			t.Fatalf("attempt %d after 5 failures (right password %v): passed %v, status %d, want 429 up front", i+1, ok, res.passed, res.status)
		}
		if ra, err := strconv.Atoi(res.header.Get("Retry-After")); err != nil || ra < 1 || ra > 120 {
			t.Fatalf("Retry-After %q, want 1..120 s (one failure's worth)", res.header.Get("Retry-After"))
		}
	}
	if res := serveNext(t, h, "198.51.100.77", login(false, false)); res.status != 401 {
		t.Fatalf("another address: %d, want 401 (its own budget)", res.status)
	}
	// One failure's worth (2 minutes) later, one more attempt: it fails
	// and is charged, so the next is refused again.
	advance(2*time.Minute + time.Second)
	if res := serveNext(t, h, ip, login(false, false)); res.status != 401 {
		t.Fatalf("after 2 min: %d, want 401", res.status)
	}
	if res := serveNext(t, h, ip, login(true, false)); res.status != 429 {
		t.Fatalf("after the sixth failure: %d, want 429", res.status)
	}
}

func TestChargeOnLoginMemory(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := memoryHandler(t, c, loginZone("charge-login-mem"))
	before := counterValue(t, "charge-login-mem", "charged")
	checkLoginScenario(t, h, "192.0.2.10", func(d time.Duration) { c.ns += int64(d) })
	if got := counterValue(t, "charge-login-mem", "charged") - before; got != 7 {
		t.Fatalf("charged counter grew by %v, want 7 (5 + another address + 1)", got)
	}
}

func TestChargeOnLoginRedis(t *testing.T) {
	rs := testredis.Start(t)
	h := redisHandler(t, rs, "deny", loginZone("charge-login-redis"))
	// Redis keeps time itself: move the caller's TAT back instead.
	checkLoginScenario(t, h, "192.0.2.10", func(d time.Duration) {
		name := h.redis.names([]requestKey{h.zones[0].key.fromString("192.0.2.10")}, make([]tag, 1), make([]string, 1))[0]
		ctx := context.Background()
		client, err := h.redis.conn.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The value is `<TAT> <given back> <block>`: move the TAT.
		err = client.Do(ctx, client.B().Eval().Script(
			"local a, rest = string.match(redis.call('GET', KEYS[1]), '^(%d+)(.*)$') "+
				"return redis.call('SET', KEYS[1], string.format('%d', tonumber(a) - tonumber(ARGV[1])) .. rest, 'KEEPTTL')").
			Numkeys(1).Key(name).Arg(strconv.FormatInt(d.Microseconds(), 10)).Build()).Error()
		if err != nil {
			t.Fatalf("moving the TAT back: %v", err)
		}
	})
}

// checkInFlightBound: G clients of one caller, each sending one failing
// request after another, the first to pass held at the origin until L =
// burst+1 are in flight at once. Each request is charged up front, so
// however many are in flight no more than L pass: the others are refused
// while those are held and after, their failures having kept the charge.
// (Before charges were taken up front, all G of the first round passed.)
func checkInFlightBound(t *testing.T, h *Handler, ip string) {
	t.Helper()
	const G, L, rounds = 8, 5, 20
	var passed, refused, held atomic.Int64
	release := make(chan struct{})
	var wg sync.WaitGroup
	for g := range G {
		wg.Go(func() {
			for i := range rounds {
				res := serveNext(t, h, ip, func(w http.ResponseWriter, r *http.Request) error {
					if held.Add(1) == L {
						close(release)
					}
					select {
					case <-release:
					case <-time.After(10 * time.Second):
						t.Errorf("client %d: %d requests never were in flight at once", g, L)
					}
					w.WriteHeader(http.StatusUnauthorized)
					return nil
				})
				switch {
				case res.passed && res.status == 401:
					passed.Add(1)
				case !res.passed && res.status == 429:
					refused.Add(1)
				default:
					t.Errorf("client %d request %d: passed %v status %d", g, i, res.passed, res.status)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d clients x %d failing requests, limit %d: %d passed, %d refused", G, rounds, L, passed.Load(), refused.Load())
	if p := passed.Load(); p != L {
		t.Fatalf("%d failing requests passed, want %d: no more than the limit, however many are in flight", p, L)
	}
}

func TestChargeOnInFlightBoundMemory(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	checkInFlightBound(t, memoryHandler(t, c, loginZone("charge-inflight-mem")), "192.0.2.20")
}

func TestChargeOnInFlightBoundRedis(t *testing.T) {
	rs := testredis.Start(t)
	checkInFlightBound(t, redisHandler(t, rs, "deny", loginZone("charge-inflight-redis")), "192.0.2.20")
}

// checkFreeRunningBound: G clients of one caller send failing requests as
// fast as they can, each answered after a short random delay: exactly the
// limit L passes.
func checkFreeRunningBound(t *testing.T, h *Handler, ip string) {
	t.Helper()
	const G, L, rounds = 8, 5, 30
	var passed atomic.Int64
	var wg sync.WaitGroup
	for g := range G {
		wg.Go(func() {
			for i := range rounds {
				res := serveNext(t, h, ip, func(w http.ResponseWriter, r *http.Request) error {
					time.Sleep(time.Duration(g*i%5) * 200 * time.Microsecond)
					return caddyhttp.Error(http.StatusForbidden, errors.New("no"))
				})
				if res.passed {
					passed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("free running: %d clients x %d failing requests, limit %d: %d passed", G, rounds, L, passed.Load())
	if p := passed.Load(); p != L {
		t.Fatalf("%d failing requests passed, want %d (the limit)", p, L)
	}
}

func TestChargeOnFreeRunningBoundMemory(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	checkFreeRunningBound(t, memoryHandler(t, c, loginZone("charge-free-mem")), "192.0.2.21")
}

func TestChargeOnFreeRunningBoundRedis(t *testing.T) {
	rs := testredis.Start(t)
	checkFreeRunningBound(t, redisHandler(t, rs, "deny", loginZone("charge-free-redis")), "192.0.2.21")
}

// checkHonestConcurrency: successful logins in flight hold the budget
// while they are (L at once, a further one refused), and give it all back
// when they answer, here in the order they were charged: then L failures
// pass again. Answered out of order, a give-back may be partial (the strict
// side; see limit.giveBack), never more than its charge.
func checkHonestConcurrency(t *testing.T, h *Handler, ip string) {
	t.Helper()
	const L = 5
	var inside, answer, done [L]chan struct{}
	var passed atomic.Int64
	for i := range L {
		inside[i], answer[i], done[i] = make(chan struct{}), make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done[i])
			res := serveNext(t, h, ip, func(w http.ResponseWriter, r *http.Request) error {
				close(inside[i])
				<-answer[i]
				w.Write([]byte("welcome"))
				return nil
			})
			if res.passed && res.status == 200 {
				passed.Add(1)
			}
		}()
		select { // charged before the next one is sent
		case <-inside[i]:
		case <-time.After(10 * time.Second):
			t.Fatalf("successful login %d refused or stuck", i+1)
		}
	}
	if res := serveNext(t, h, ip, login(true, false)); res.status != 429 {
		t.Fatalf("login with %d in flight: %d, want 429 (those in flight hold the budget)", L, res.status)
	}
	for i := range L { // answered one after another
		close(answer[i])
		<-done[i]
	}
	if passed.Load() != L {
		t.Fatalf("%d of %d held successful logins answered 200", passed.Load(), L)
	}
	for i := range L {
		if res := serveNext(t, h, ip, login(false, false)); res.status != 401 {
			t.Fatalf("failed login %d after the successes: %d, want 401 (every success given back)", i+1, res.status)
		}
	}
	if res := serveNext(t, h, ip, login(false, false)); res.status != 429 {
		t.Fatalf("failed login %d: %d, want 429", L+1, res.status)
	}
}

func TestChargeOnHonestConcurrencyMemory(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	checkHonestConcurrency(t, memoryHandler(t, c, loginZone("charge-honest-mem")), "192.0.2.22")
}

func TestChargeOnHonestConcurrencyRedis(t *testing.T) {
	rs := testredis.Start(t)
	checkHonestConcurrency(t, redisHandler(t, rs, "deny", loginZone("charge-honest-redis")), "192.0.2.22")
}

// TestChargeOnWithOtherZones: a charge_on zone only checks up front; a zone
// without charge_on is charged up front as before, and a request the
// charge_on zone refuses consumes nothing there.
func TestChargeOnWithOtherZones(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := memoryHandler(t, c,
		&Zone{Name: "charge-mix-fail", Rate: "1/1h", Burst: new(int64(1)), ChargeOn: &ChargeOn{Status: []int{401}}},
		&Zone{Name: "charge-mix-all", Rate: "1/1h", Burst: new(int64(3))},
	)
	for i, want := range []int{200, 401, 401, 429, 429, 429} {
		if res := serveNext(t, h, "192.0.2.30", login(i == 0, false)); res.status != want {
			t.Fatalf("request %d: %d, want %d", i+1, res.status, want)
		}
	}
	// charge-mix-all took 3 (refused ones consumed nothing): one is left.
	h2 := memoryHandler(t, c, &Zone{Name: "charge-mix-all", Rate: "1/1h", Burst: new(int64(3))})
	for i, want := range []int{200, 429} {
		if res := serveNext(t, h2, "192.0.2.30", login(true, false)); res.status != want {
			t.Fatalf("charge-mix-all afterwards, request %d: %d, want %d", i+1, res.status, want)
		}
	}
}

// TestChargeOnObserve: observe passes a request enforce would refuse and
// charges it nothing, consuming exactly what enforce would.
func TestChargeOnObserve(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	z := loginZone("charge-observe")
	h := provision(t, &Handler{Zones: []*Zone{z}, Mode: ModeObserve}, c)
	for i := range 9 {
		res := serveNext(t, h, "192.0.2.40", login(false, false))
		if res.status != 401 {
			t.Fatalf("observe, request %d: %d", i+1, res.status)
		}
		if marked := res.vars[ObservedVar] != nil; marked != (i >= 5) {
			t.Fatalf("observe, request %d marked %v", i+1, marked)
		}
	}
	// Only the 5 enforce would have let through were charged: 2 minutes on,
	// one is allowed again.
	c.ns += int64(2*time.Minute + time.Second)
	if res := serveNext(t, h, "192.0.2.40", login(false, false)); res.vars[ObservedVar] != nil {
		t.Fatal("refused requests were charged in observe mode")
	}
}

// TestChargeOnWriteOrder: the charge is taken up front and given back
// before a response that does not match is written on; an informational
// status is not the response's.
func TestChargeOnWriteOrder(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := memoryHandler(t, c, &Zone{Name: "charge-order", Rate: "1/1h", ChargeOn: &ChargeOn{Status: []int{401}}})
	serveNext(t, h, "192.0.2.50", func(w http.ResponseWriter, r *http.Request) error {
		if h.zones[0].peekAllowed("192.0.2.50") {
			t.Error("not charged up front")
		}
		w.WriteHeader(http.StatusEarlyHints)
		if h.zones[0].peekAllowed("192.0.2.50") {
			t.Error("given back for 103 Early Hints")
		}
		w.WriteHeader(http.StatusOK)
		if !h.zones[0].peekAllowed("192.0.2.50") {
			t.Error("200 written, not yet given back")
		}
		return nil
	})
	serveNext(t, h, "192.0.2.50", func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusUnauthorized)
		if h.zones[0].peekAllowed("192.0.2.50") {
			t.Error("401 written, charge given back")
		}
		return nil
	})
}

// peekAllowed is whether a memory zone would let key through now, without
// charging it.
func (z *zone) peekAllowed(key string) bool {
	h := z.key.fromString(key).hash()
	s := z.table.shard(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	o, _ := z.limit.check(s.m[h], int64(time.Hour))
	return o.allowed
}

func TestChargeOnCaddyfile(t *testing.T) {
	for in, want := range map[string]string{
		"charge_on status 401 403":                   "",
		"charge_on status":                           "charge_on: no status",
		"charge_on status 99":                        "charge_on status 99: must be an HTTP status, 100..599",
		"charge_on status 401 100":                   "charge_on status 100: an informational (1xx) status is never a response's final status",
		"charge_on status 103":                       "charge_on status 103: an informational (1xx) status",
		"charge_on status 101 401":                   "",
		"charge_on status abc":                       `charge_on status "abc": must be a number`,
		"charge_on header X":                         `charge_on "header": want charge_on status <code>...`,
		"charge_on":                                  "wrong argument count",
		"charge_on status 401\ncharge_on status 403": "charge_on given twice",
	} {
		d := caddyfile.NewTestDispenser("throttle {\nzone z {\nrate 5/10m\n" + in + "\n}\n}")
		var h Handler
		err := h.UnmarshalCaddyfile(d)
		if want == "" {
			if err != nil || h.Zones[0].ChargeOn == nil || len(h.Zones[0].ChargeOn.Status) != 2 || h.Zones[0].ChargeOn.Status[1] != 401 && h.Zones[0].ChargeOn.Status[1] != 403 {
				t.Errorf("%q: %v, %+v", in, err, h.Zones[0].ChargeOn)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one saying %q", in, err, want)
		}
	}
	// JSON goes through the same check.
	h := &Handler{Zones: []*Zone{{Name: "charge-json", Rate: "1/s", ChargeOn: &ChargeOn{}}}}
	ctx, cancel := newContext()
	defer cancel()
	if err := h.Provision(ctx); err == nil || !strings.Contains(err.Error(), `zone "charge-json": charge_on: no status`) {
		t.Fatalf("JSON charge_on without status: %v", err)
	}
	h = &Handler{Zones: []*Zone{{Name: "charge-json-1xx", Rate: "1/s", ChargeOn: &ChargeOn{Status: []int{401, 102}}}}}
	if err := h.Provision(ctx); err == nil || !strings.Contains(err.Error(), `zone "charge-json-1xx": charge_on status 102: an informational`) {
		t.Fatalf("JSON charge_on status 102: %v", err)
	}
}

// TestChargeOnRedisFailsAtGiveBack: Redis gone between the decision and
// giving back a charge the response did not earn: the response stands, the
// failure is counted, nothing panics.
func TestChargeOnRedisFailsAtGiveBack(t *testing.T) {
	rs := testredis.Start(t)
	h := redisHandler(t, rs, "deny", loginZone("charge-redis-gone"))
	var m dto.Metric
	storeErrors := func() float64 {
		if err := throttleMetrics.storeErrors.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	before := storeErrors()
	res := serveNext(t, h, "192.0.2.70", func(w http.ResponseWriter, r *http.Request) error {
		rs.Stop()
		w.WriteHeader(http.StatusOK)
		return nil
	})
	if !res.passed || res.status != 200 {
		t.Fatalf("response: passed %v, %d; want the 200 as written", res.passed, res.status)
	}
	if got := storeErrors() - before; got != 1 {
		t.Fatalf("store errors grew by %v, want 1 (the give-back)", got)
	}
}

// TestChargeOnPartOfZoneDefinition: one config may not name a zone with
// charge_on in one handler and without (or with other statuses) in another.
func TestChargeOnPartOfZoneDefinition(t *testing.T) {
	ctx, cancel := newContext()
	defer cancel()
	provisionIn(t, ctx, &Handler{Zones: []*Zone{loginZone("charge-def")}}, nil)
	other := loginZone("charge-def")
	other.ChargeOn.Status = []int{401}
	for _, z := range []*Zone{other, {Name: "charge-def", Rate: "5/10m", Burst: new(int64(4))}} {
		err := (&Handler{Zones: []*Zone{z}}).Provision(ctx)
		if err == nil || !strings.Contains(err.Error(), "defined twice differently") || !strings.Contains(err.Error(), "charge_on status") {
			t.Fatalf("zone redefined with charge_on %+v: %v", z.ChargeOn, err)
		}
	}
}
