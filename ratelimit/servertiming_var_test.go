package ratelimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestServerTimingVar: with server_timing's marker variable set, throttle
// leaves its decision's time in server_timing.throttle, before next runs;
// without it, it leaves nothing.
func TestServerTimingVar(t *testing.T) {
	h := provision(t, &Handler{Zones: []*Zone{{Name: "z", Rate: "10/s"}}}, &fakeClock{ns: 1})
	for _, on := range []bool{true, false} {
		vars := map[string]any{caddyhttp.ClientIPVarKey: "192.0.2.1"}
		if on {
			vars[serverTimingOn] = true
		}
		r := httptest.NewRequest("GET", "http://example.com/", nil)
		r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
		caddyhttp.NewTestReplacer(r)
		var seen any
		err := h.ServeHTTP(httptest.NewRecorder(), r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			seen = caddyhttp.GetVar(r.Context(), serverTimingThrottle)
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		d, isDur := seen.(time.Duration)
		if on && (!isDur || d < 0) {
			t.Errorf("marker set: %s = %#v, want a time.Duration", serverTimingThrottle, seen)
		}
		if !on && seen != nil {
			t.Errorf("marker unset: %s = %#v, want nothing", serverTimingThrottle, seen)
		}
	}
}
