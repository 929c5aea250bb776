package ratelimit

import (
	"testing"
	"time"
)

// Cases of mholt/caddy-ratelimit (Apache-2.0) run against throttle, for
// docs/migrate-ratelimit.md. Its handler_test.go drives a sliding window on
// an injected clock; these drive throttle's GCRA the same way. The Go code
// is ours; the inputs and the source's expected answers are its tests'.

// TestCaddyRatelimitWindowCase is caddy-ratelimit's TestRateLimits: key
// static, window 60s, max_events 10. Both pass the first 10 requests and
// refuse the 11th, but the answers differ: the sliding window says
// Retry-After 60 (then 30 half a window later, and passes after a whole
// window), GCRA says 6 (one request every 6 s comes back), and half a
// window later 5 requests pass.
func TestCaddyRatelimitWindowCase(t *testing.T) {
	clock := &fakeClock{ns: int64(time.Hour)}
	h := memoryHandler(t, clock, &Zone{Name: "zone1", Key: "static", Rate: "10/1m"})
	for i := range 10 {
		if res := serve(t, h, "192.0.2.1", nil); !res.passed {
			t.Fatalf("request %d of 10 refused: %d", i+1, res.status)
		}
	}
	res := serve(t, h, "192.0.2.1", nil)
	if res.passed || res.status != 429 || res.header.Get("Retry-After") != "6" {
		t.Fatalf("request 11: passed %v, %d, Retry-After %q; want 429 with Retry-After 6 (caddy-ratelimit: 60)",
			res.passed, res.status, res.header.Get("Retry-After"))
	}
	// caddy-ratelimit: advanceTime(window/2), still 429 with Retry-After 30.
	clock.ns += int64(30 * time.Second)
	for i := range 5 {
		if res := serve(t, h, "192.0.2.1", nil); !res.passed {
			t.Fatalf("half a window later, request %d of 5 refused: Retry-After %q (GCRA refilled 5)", i+1, res.header.Get("Retry-After"))
		}
	}
	if res := serve(t, h, "192.0.2.1", nil); res.passed {
		t.Fatal("half a window later, a 6th request passed: GCRA refilled only 5")
	}
	// caddy-ratelimit: advanceTime(window), 200 again.
	clock.ns += int64(60 * time.Second)
	if res := serve(t, h, "192.0.2.1", nil); !res.passed {
		t.Fatalf("a window later: refused, Retry-After %q", res.header.Get("Retry-After"))
	}
}

// TestCaddyRatelimitDistinctKeysCase is caddy-ratelimit's
// TestDistinctZonesAndKeys with the key read from a header (its test keys
// on the path): each key has its own budget. Its zones by method are, in
// throttle, a throttle per route matcher.
func TestCaddyRatelimitDistinctKeysCase(t *testing.T) {
	h := memoryHandler(t, &fakeClock{ns: int64(time.Hour)}, &Zone{Name: "zone1", Key: "{http.request.header.X-Path}", Rate: "10/1m"})
	for _, path := range []string{"/path1", "/path2"} {
		hdr := map[string]string{"X-Path": path}
		for i := range 10 {
			if res := serve(t, h, "192.0.2.1", hdr); !res.passed {
				t.Fatalf("%s: request %d of 10 refused", path, i+1)
			}
		}
		if res := serve(t, h, "192.0.2.1", hdr); res.passed || res.status != 429 {
			t.Fatalf("%s: request 11 passed %v, %d; want 429", path, res.passed, res.status)
		}
	}
}

// TestCaddyRatelimitEmptyKeyCase: caddy-ratelimit expands a key with
// repl.ReplaceAll(key, ""), so every request whose key header is absent
// shares the one budget of the key "" (one caller without the header shuts
// out every other). throttle's default (on_empty_key client_ip) gives each
// caller its own budget instead; on_empty_key skip leaves such requests
// unlimited, as nginx's limit_req does.
func TestCaddyRatelimitEmptyKeyCase(t *testing.T) {
	h := memoryHandler(t, &fakeClock{ns: int64(time.Hour)}, &Zone{Name: "apikey", Key: "{http.request.header.X-Api-Key}", Rate: "2/1m"})
	for i := range 2 {
		if res := serve(t, h, "192.0.2.1", nil); !res.passed {
			t.Fatalf("first caller without a key: request %d of 2 refused", i+1)
		}
	}
	if res := serve(t, h, "192.0.2.1", nil); res.passed {
		t.Fatal("first caller without a key: request 3 passed; its own budget is 2")
	}
	if res := serve(t, h, "192.0.2.2", nil); !res.passed {
		t.Fatal("a second caller without a key was refused: the empty key was one shared budget (caddy-ratelimit's behaviour)")
	}

	skip := memoryHandler(t, &fakeClock{ns: int64(time.Hour)}, &Zone{Name: "apikey-skip", Key: "{http.request.header.X-Api-Key}", Rate: "2/1m", OnEmptyKey: EmptyKeySkip})
	for i := range 5 {
		if res := serve(t, skip, "192.0.2.1", nil); !res.passed {
			t.Fatalf("on_empty_key skip: request %d without a key refused", i+1)
		}
	}
}
