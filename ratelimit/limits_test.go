package ratelimit

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestPolicyWindowLargeRates: the quota scaled to whole seconds is computed
// without overflow (1000000/1d was announced as q=-67519, 5000/1000h as
// q=-124), and every announced pair is positive and never promises more
// than the rate allows over the window.
func TestPolicyWindowLargeRates(t *testing.T) {
	for in, want := range map[string]string{
		"1000000/1d":        `"z";q=1000000;w=86400`,
		"5000/1000h":        `"z";q=5000;w=3600000`,
		"1000000000/1d":     `"z";q=1000000000;w=86400`,
		"1000000000/1000s":  `"z";q=1000000000;w=1000`,
		"1/8784h":           `"z";q=1;w=31622400`,
		"1000000000/8784h":  `"z";q=1000000000;w=31622400`,
		"1000000/1000001us": `"z";q=1999998;w=2`,
		"999999/999999us":   `"z";q=1000000;w=1`,
		"3/1001ms":          `"z";q=5;w=2`,
	} {
		r, err := parseRate(in)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := policyItem("z", r, 0); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// TestGCRASaturates: a period that would carry the TAT past the largest
// int64 saturates instead of wrapping to the past (rate 1/2562047h let the
// second request through).
func TestGCRASaturates(t *testing.T) {
	r := rate{n: 1, period: 2562047 * time.Hour} // beyond what parseRate accepts
	for _, burst := range []int64{0, 1, math.MaxInt64} {
		l := newLimit(r, burst)
		if l.interval <= 0 || l.tolerance < 0 {
			t.Fatalf("burst %d: limit %+v", burst, l)
		}
		now := int64(time.Hour)
		tat := int64(0)
		passed := 0
		for i := range 3 {
			o, next := l.check(tat, now)
			if next < now {
				t.Fatalf("burst %d, request %d: TAT wrapped to %d (now %d)", burst, i, next, now)
			}
			if !o.allowed {
				break
			}
			passed++
			tat = next
			now += int64(time.Second)
		}
		// Without burst one request per period: the second, a second
		// later, must wait (it passed when the TAT wrapped).
		if burst == 0 && passed != 1 {
			t.Errorf("burst 0: %d of 3 requests passed, want 1", passed)
		}
		if got := l.remaining(outcome{after: math.MaxInt64}); got != 0 {
			t.Errorf("burst %d: remaining at a saturated TAT = %d", burst, got)
		}
	}
}

// TestLongPeriodRefused: a period or a burst refill time beyond 366 days is
// refused at config time, in JSON and in the Caddyfile, with an error that
// says the maximum.
func TestLongPeriodRefused(t *testing.T) {
	for _, tc := range []struct {
		zone Zone
		want string
	}{
		{Zone{Name: "z", Rate: "1/2562047h"}, `throttle: zone "z": rate "1/2562047h": duration 2562047h0m0s is longer than the maximum of 366 days (8784h)`},
		{Zone{Name: "z", Rate: "1000/8785h"}, `throttle: zone "z": rate "1000/8785h": duration 8785h0m0s is longer than the maximum`},
		{Zone{Name: "z", Rate: "1/8784h", Burst: new(int64(2))}, `throttle: zone "z": burst 2: must be 0..1 at this rate (a full burst must refill within 366 days)`},
		{Zone{Name: "z", Rate: "10/s", Burst: new(int64(316224001))}, `throttle: zone "z": burst 316224001: must be 0..316224000 at this rate`},
	} {
		ctx, cancel := newContext()
		h := Handler{Zones: []*Zone{&tc.zone}}
		err := h.Provision(ctx)
		_ = h.Cleanup()
		cancel()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q...", tc.zone, err, tc.want)
		}
	}
	for _, ok := range []Zone{{Name: "z", Rate: "1/8784h"}, {Name: "z", Rate: "10/s", Burst: new(int64(316224000))}, {Name: "z", Rate: "1000000000/8784h", Burst: new(int64(1000000000))}} {
		provision(t, &Handler{Zones: []*Zone{&ok}}, nil)
	}
	d := caddyfile.NewTestDispenser(`throttle {
		zone z {
			rate 1/2562047h
		}
	}`)
	var h Handler
	err := h.UnmarshalCaddyfile(d)
	if err == nil || !strings.Contains(err.Error(), "longer than the maximum of 366 days") {
		t.Fatalf("Caddyfile: error %v, want the 366 days maximum", err)
	}
}
