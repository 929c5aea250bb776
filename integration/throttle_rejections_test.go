package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestThrottleRejectionLogWithoutKey: each rejection logs one line at the
// configured level with the zone, the caller's partition key (the pk of
// its RateLimit fields) and the rule, and the refusing zone is in
// {http.vars.throttle_rejected} for handle_errors and the access log; the
// API key the zone is keyed on appears nowhere in Caddy's output, neither
// a short one nor one of 16 KiB (the access log's copy of the header is
// filtered out, as docs/throttle.md says to).
func TestThrottleRejectionLogWithoutKey(t *testing.T) {
	const secret = "sk_live_51HdXkQ2eZvKYlo2C0a9e8d7c6b5a4f3e2d1"
	huge := "sk_huge_" + strings.Repeat("Zq9", 16<<10/3)
	origin := EchoOrigin(t)
	c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {
	log {
		format filter {
			wrap json
			request>headers>X-Api-Key delete
		}
	}
	log_append throttled_by {http.vars.throttle_rejected}
	throttle {
		zone per_key {
			key {http.request.header.X-Api-Key}
			rate 2/1h
		}
		log_rejections warn
	}
	reverse_proxy `+origin+`
	handle_errors 429 {
		respond "refused by {http.vars.throttle_rejected}" 429
	}
}`)
	var pks []string
	for _, key := range []string{secret, huge} {
		for i, want := range []int{200, 200, 429} {
			resp, body := Get(t, c.Client(), c.URL("/"), "X-Api-Key", key)
			if resp.StatusCode != want {
				t.Fatalf("key of %d bytes, request %d: %d %q, want %d", len(key), i+1, resp.StatusCode, body, want)
			}
			if want == 429 {
				if body != "refused by per_key" {
					t.Fatalf("handle_errors saw throttle_rejected %q", body)
				}
				rl := resp.Header.Get("RateLimit")
				pks = append(pks, rl[strings.Index(rl, ";pk=:")+5:len(rl)-1])
			}
		}
	}
	var lines []map[string]any
	if !WaitFor(t.Context(), 10*time.Second, func() bool {
		lines = lines[:0]
		for line := range strings.SplitSeq(c.Logs(), "\n") {
			var e map[string]any
			if json.Unmarshal([]byte(line), &e) == nil && e["msg"] == "rejected" {
				lines = append(lines, e)
			}
		}
		return len(lines) == 2 && strings.Count(c.Logs(), `"throttled_by":"per_key"`) == 2
	}) {
		t.Fatalf("rejection lines %v, access log lines with throttled_by:\n%s", lines, grepLines(c.Logs(), "throttled_by"))
	}
	for i, e := range lines {
		if e["level"] != "warn" || e["zone"] != "per_key" || e["pk"] != pks[i] || e["rule"] != "rate 2/1h burst 1" || e["status"] != float64(429) || e["retry_after"] != float64(1800) {
			t.Errorf("rejection line %d: %v; want level warn, zone per_key, pk %s, rule, status, retry_after", i, e, pks[i])
		}
	}
	logs := c.Logs()
	for _, key := range []string{secret, huge[:64]} {
		if strings.Contains(logs, key) {
			t.Fatalf("the key %.20s... appears in Caddy's output:\n%s", key, grepLines(logs, key))
		}
	}
}

// TestThrottleRateIsBucketOfN: `rate 5/1h` without burst lets 5 requests
// through at once, GET and HEAD alike, and the sixth gets 429 with
// Retry-After 720 (one refill), as RateLimit-Policy q=5;w=3600 says; with
// `burst 0` the second request is refused.
func TestThrottleRateIsBucketOfN(t *testing.T) {
	c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {
	throttle /bucket {
		zone bucket {
			rate 5/1h
		}
	}
	throttle /strict {
		zone strict {
			rate 5/1h
			burst 0
		}
	}
	respond "ok"
}`)
	client := c.Client()
	for i, method := range []string{"GET", "HEAD", "GET", "HEAD", "GET", "GET"} {
		req, _ := http.NewRequest(method, c.URL("/bucket"), nil)
		resp, _ := Do(t, client, req)
		want := 200
		if i == 5 {
			want = 429
		}
		if resp.StatusCode != want || !strings.HasPrefix(resp.Header.Get("RateLimit-Policy"), `"bucket";q=5;w=3600;pk=:`) {
			t.Fatalf("%s %d: %d, RateLimit-Policy %q; want %d", method, i+1, resp.StatusCode, resp.Header.Get("RateLimit-Policy"), want)
		}
		if want == 429 && resp.Header.Get("Retry-After") != "720" {
			t.Fatalf("sixth: Retry-After %q, want 720", resp.Header.Get("Retry-After"))
		}
	}
	for i, want := range []int{200, 429} {
		if resp, _ := Get(t, client, c.URL("/strict")); resp.StatusCode != want {
			t.Fatalf("burst 0, request %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
}
