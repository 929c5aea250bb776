package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestLimitReqAgainstNginx puts nginx's limit_req (rate=10r/m burst=5
// nodelay) and throttle (rate 10/1m, burst 5) side by side, for
// docs/migrate-ratelimit.md: both let the same 6 requests through at once;
// nginx refuses the 7th with a 503 and no Retry-After, throttle with a 429
// and Retry-After 6. A key that expands to nothing: nginx does not count
// the request (unlimited), throttle falls back to the caller's address,
// and with on_empty_key skip does as nginx.
func TestLimitReqAgainstNginx(t *testing.T) {
	// limit_req runs in the preaccess phase, after return (rewrite): nginx
	// serves files here, and /return shows a limit that never applies.
	root := t.TempDir()
	for _, name := range []string{"ip", "key"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte("ok"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// nginx first: without it the test skips before any Caddy starts.
	nginx := StartNginx(t, `
	limit_req_zone $binary_remote_addr zone=perip:1m rate=10r/m;
	limit_req_zone $http_x_api_key zone=apikey:1m rate=10r/m;`, `
		root `+root+`;
		location = /ip { limit_req zone=perip burst=5 nodelay; }
		location = /key { limit_req zone=apikey burst=5 nodelay; }
		location = /return { limit_req zone=perip burst=5 nodelay; return 200 ok; }`)
	c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {
	handle /ip {
		throttle {
			zone perip {
				rate 10/1m
				burst 5
			}
		}
		respond ok
	}
	handle /key {
		throttle {
			zone apikey {
				key {http.request.header.X-Api-Key}
				rate 10/1m
				burst 5
			}
		}
		respond ok
	}
	handle /key-skip {
		throttle {
			zone apikey_skip {
				key {http.request.header.X-Api-Key}
				on_empty_key skip
				rate 10/1m
				burst 5
			}
		}
		respond ok
	}
}`)
	get := func(client *http.Client, url string) *http.Response {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	// passes counts the requests let through before the first refusal
	// (at most 12) and returns that refusal, nil if none.
	passes := func(client *http.Client, url string) (int, *http.Response) {
		for i := range 12 {
			if resp := get(client, url); resp.StatusCode != 200 {
				return i, resp
			}
		}
		return 12, nil
	}
	ours, theirs := c.Client(), http.DefaultClient

	n, refusal := passes(theirs, nginx.URL("/ip"))
	if n != 6 || refusal == nil || refusal.StatusCode != 503 || refusal.Header.Get("Retry-After") != "" {
		t.Errorf("nginx limit_req: %d passed, then %v; want 6, then a 503 without Retry-After", n, describe(refusal))
	}
	n, refusal = passes(ours, c.URL("/ip"))
	if n != 6 || refusal == nil || refusal.StatusCode != 429 {
		t.Fatalf("throttle: %d passed, then %v; want 6, then a 429", n, describe(refusal))
	}
	if ra, err := strconv.Atoi(refusal.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 6 {
		t.Errorf("throttle's Retry-After is %q, want 6 s or less (one request every 6 s)", refusal.Header.Get("Retry-After"))
	}

	if n, refusal := passes(theirs, nginx.URL("/return")); n != 12 {
		t.Errorf("nginx limit_req before return: refused after %d (%v); want never (return runs first)", n, describe(refusal))
	}

	// No X-Api-Key: nginx does not account the request.
	if n, refusal := passes(theirs, nginx.URL("/key")); n != 12 {
		t.Errorf("nginx limit_req, empty key: refused after %d (%v); want never", n, describe(refusal))
	}
	if n, refusal := passes(ours, c.URL("/key")); n != 6 || refusal == nil || refusal.StatusCode != 429 {
		t.Errorf("throttle, empty key: %d passed, then %v; want the caller's own budget of 6", n, describe(refusal))
	}
	if n, refusal := passes(ours, c.URL("/key-skip")); n != 12 {
		t.Errorf("throttle on_empty_key skip: refused after %d (%v); want never, as nginx", n, describe(refusal))
	}
}

func describe(resp *http.Response) string {
	if resp == nil {
		return "no refusal"
	}
	return resp.Status + " Retry-After " + strconv.Quote(resp.Header.Get("Retry-After"))
}
