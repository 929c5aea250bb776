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

// TestHeadersCostTwoAllocations: both RateLimit fields of any number of
// zones are one string and one array of values, and each field's slice
// of that array is capped, so appending to one leaves the other as it was.
func TestHeadersCostTwoAllocations(t *testing.T) {
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
		keys[i], _ = z.key.key(r)
	}
	hdr := http.Header{}
	if n := testing.AllocsPerRun(100, func() { h.setHeaders(hdr, keys[:2], out[:2], allZones) }); n > 2 && !raceEnabled {
		t.Errorf("setHeaders: %v allocations, want at most 2", n)
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
