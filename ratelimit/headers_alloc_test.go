package ratelimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestHeadersCostOneAllocation: both RateLimit fields of two zones are one
// object holding the array of values and their bytes (it was two: the
// string and the array), and each field's slice of that array is capped,
// so appending to one leaves the other as it was.
func TestHeadersCostOneAllocation(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := provision(t, &Handler{Zones: []*Zone{
		{Name: "headers-alloc-a", Rate: "1000000/s", Burst: new(int64(100))},
		{Name: "headers-alloc-b", Rate: "1000000/s", Burst: new(int64(50)), Key: "{http.request.header.X-Api-Key}"},
	}}, c)
	r := httptest.NewRequest("GET", "http://example.com/", nil)
	r.Header.Set("X-Api-Key", "k1")
	vars := map[string]any{caddyhttp.ClientIPVarKey: "2001:db8::1"}
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
	caddyhttp.NewTestReplacer(r)
	var keys [maxZones]requestKey
	var out [maxZones]outcome
	for i, z := range h.zones {
		keys[i], _ = z.key.key(r, varsOf(r))
	}
	hdr := http.Header{}
	if n := testing.AllocsPerRun(100, func() { h.setHeaders(hdr, keys[:2], out[:2], allZones) }); n > 1 && !raceEnabled {
		t.Errorf("setHeaders: %v allocations, want 1", n)
	}
	policy, state := hdr.Get("Ratelimit-Policy"), hdr.Get("Ratelimit")
	if !strings.HasPrefix(policy, `"headers-alloc-a";q=`) || !strings.Contains(policy, `, "headers-alloc-b";q=`) {
		t.Errorf("RateLimit-Policy = %q", policy)
	}
	if !strings.HasPrefix(state, `"headers-alloc-a";r=`) || !strings.Contains(state, `, "headers-alloc-b";r=`) || strings.Contains(state, ";q=") {
		t.Errorf("RateLimit = %q", state)
	}
	hdr.Add("Ratelimit-Policy", "x")
	if got := hdr.Get("Ratelimit"); got != state {
		t.Errorf("after an Add to RateLimit-Policy, RateLimit = %q, want %q", got, state)
	}
}

// TestHeadersLongValues: values longer than one allocation's room
// (fieldBytes: eight zones with long names) are whole, in zone order,
// and still capped apart.
func TestHeadersLongValues(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	var zs []*Zone
	for i := range maxZones {
		zs = append(zs, &Zone{Name: "headers-long-" + strings.Repeat("x", 40) + string(rune('a'+i)), Rate: "1000000/s", Burst: new(int64(100))})
	}
	h := provision(t, &Handler{Zones: zs}, c)
	r := httptest.NewRequest("GET", "http://example.com/", nil)
	vars := map[string]any{caddyhttp.ClientIPVarKey: "192.0.2.7"}
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
	w := httptest.NewRecorder()
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	if err := h.ServeHTTP(w, r, next); err != nil {
		t.Fatal(err)
	}
	policy, state := w.Header().Get("Ratelimit-Policy"), w.Header().Get("Ratelimit")
	if len(policy)+len(state) <= fieldBytes {
		t.Fatalf("values of %d bytes fit one allocation: the test must exceed %d", len(policy)+len(state), fieldBytes)
	}
	for _, v := range []string{policy, state} {
		if got := strings.Count(v, ";pk=:"); got != maxZones {
			t.Errorf("%q: %d members, want %d", v, got, maxZones)
		}
	}
	pk := state[strings.Index(state, ";pk="):strings.Index(state, ", ")]
	if !strings.HasSuffix(policy, pk) || strings.Contains(policy, ";r=") || strings.Contains(state, ";q=") {
		t.Errorf("RateLimit-Policy = %q, RateLimit = %q", policy, state)
	}
	w.Header().Add("Ratelimit-Policy", "x")
	if got := w.Header().Get("Ratelimit"); got != state {
		t.Errorf("after an Add to RateLimit-Policy, RateLimit = %q, want %q", got, state)
	}
}

// TestHandlerAllocations: a request that one rate zone (the default key)
// lets through costs the handler one allocation, the RateLimit fields'
// (it was two), and none with headers off.
func TestHandlerAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, tc := range []struct {
		name    string
		headers bool
		want    float64
	}{{"headers", true, 1}, {"headers-off", false, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeClock{ns: int64(time.Hour)}
			h := provision(t, &Handler{Zones: []*Zone{{Name: "handler-allocs-" + tc.name, Rate: "1000000/s", Burst: new(int64(100))}}, Headers: &tc.headers}, c)
			r := httptest.NewRequest("GET", "http://example.com/", nil)
			vars := map[string]any{caddyhttp.ClientIPVarKey: "2001:db8::1", "start_time": time.Now()}
			r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
			w := httptest.NewRecorder()
			next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
			n := testing.AllocsPerRun(200, func() {
				c.ns += int64(time.Microsecond)
				if err := h.ServeHTTP(w, r, next); err != nil {
					t.Fatal(err)
				}
			})
			if n > tc.want {
				t.Errorf("ServeHTTP: %v allocations, want %v", n, tc.want)
			}
		})
	}
}

// countingCtx counts the lookups of Caddy's variables through it.
type countingCtx struct {
	context.Context
	vars int
}

func (c *countingCtx) Value(key any) any {
	if key == caddyhttp.VarsCtxKey {
		c.vars++
	}
	return c.Context.Value(key)
}

// TestHandlerReadsVarsOnce: the handler looks Caddy's variables up in the
// request's context once (client_ip, server_timing and the start time
// are all in them; it was once each), since Caddy's context chain is deep
// and each lookup walks it.
func TestHandlerReadsVarsOnce(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := provision(t, &Handler{Zones: []*Zone{{Name: "vars-once", Rate: "1000000/s", Burst: new(int64(100))}}}, c)
	h.now = nil // the start time comes from the variables
	vars := map[string]any{caddyhttp.ClientIPVarKey: "192.0.2.9", "start_time": time.Now()}
	ctx := &countingCtx{Context: context.WithValue(context.Background(), caddyhttp.VarsCtxKey, vars)}
	r := httptest.NewRequest("GET", "http://example.com/", nil).WithContext(ctx)
	w := httptest.NewRecorder()
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	if err := h.ServeHTTP(w, r, next); err != nil {
		t.Fatal(err)
	}
	if ctx.vars != 1 {
		t.Errorf("the variables were looked up %d times, want 1", ctx.vars)
	}
	if w.Header().Get("Ratelimit") == "" {
		t.Error("no RateLimit field: the request was not decided")
	}
}

// TestFieldValuesSizes: at each size's edges the two values are b cut at
// policyLen, in one allocation up to fieldBytes and two past it.
func TestFieldValuesSizes(t *testing.T) {
	src := make([]byte, 1000)
	for i := range src {
		src[i] = 'a' + byte(i%26)
	}
	for _, n := range []int{1, 111, 112, 113, 223, 224, 225, 255, 256, 257, 351, 352, 353, 479, 480, 481, 1000} {
		b := src[:n]
		cut := n / 2
		vals := newFieldValues(b, cut)
		if vals[0] != string(b[:cut]) || vals[1] != string(b[cut:]) {
			t.Errorf("%d bytes: values %q, %q", n, vals[0], vals[1])
		}
		want := 1.0
		if n > fieldBytes {
			want = 2
		}
		if got := testing.AllocsPerRun(20, func() { newFieldValues(b, cut) }); got != want && !raceEnabled {
			t.Errorf("%d bytes: %v allocations, want %v", n, got, want)
		}
	}
}
