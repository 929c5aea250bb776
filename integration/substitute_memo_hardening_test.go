package integration

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestSubstituteMemoCostIsFixed: the memo remembers one entry per resource
// (method, host, path, query) with a strong ETag. Whatever a caller puts in
// the query, an entry must cost the same few bytes: 3,000 requests with
// unique 16 KiB queries, each one memo entry, may not grow Caddy's heap (after
// a forced GC) by more than a few MiB. Keeping the request's strings cost
// about 18 KiB an entry: 55 MiB here.
func TestSubstituteMemoCostIsFixed(t *testing.T) {
	const requests = 3000
	origin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("ETag", `"v1"`)
		fmt.Fprint(w, "<p>hello from the origin</p>")
	}))
	c := StartCaddy(t, `
http://{$HOST}:{$HTTP_PORT} {
	substitute {
		replace origin edge
		memo 10000
	}
	reverse_proxy `+origin+`
}`)
	client := c.Client()
	heap := func() float64 {
		t.Helper()
		// ?gc=1 makes the profile handler collect garbage first.
		resp, _ := Get(t, client, c.AdminURL("/debug/pprof/heap?gc=1"))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("admin /debug/pprof/heap: status %d", resp.StatusCode)
		}
		return counterValue(t, c.Metrics(), "go_memstats_heap_inuse_bytes")
	}
	get := func(query string) {
		t.Helper()
		resp, body := Get(t, client, c.URL("/page?"+query))
		if resp.StatusCode != http.StatusOK || body != "<p>hello from the edge</p>" {
			t.Fatalf("GET /page?%.20s…: status %d, body %q", query, resp.StatusCode, body)
		}
	}
	for i := range 50 { // warm up pools and connections
		get("warm=" + strconv.Itoa(i))
	}
	before := heap()
	pad := strings.Repeat("x", 16<<10)
	for i := range requests {
		get(strconv.Itoa(i) + "=" + pad)
	}
	grown := heap() - before
	t.Logf("heap in use grew by %.1f MiB after %d memo entries with 16 KiB queries (%.0f B an entry)",
		grown/(1<<20), requests, grown/requests)
	if grown > 8<<20 {
		t.Errorf("heap grew by %.1f MiB for %d entries: a memo entry keeps the request's strings", grown/(1<<20), requests)
	}
	if counterValue(t, c.Metrics(), "caddy_substitute_memo_misses_total") == 0 {
		t.Error("no memo misses counted: the memo was not in use")
	}
}
