package integration

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// client_ip with an IP-range source whose ranges change while Caddy runs:
// the test-only module http.ip_sources.edgekit_test_file
// (integration/internal/testipsource) lists the prefixes of a file, and the
// test rewrites the file. Clients come from 127.0.0.1, so listing loopback
// makes them the edge, and dropping it makes them strangers again, with no
// reload in between.

var testCaddy struct {
	once sync.Once
	path string
	err  error
}

// testCaddyBinary builds integration/internal/testcaddy (Caddy plus the
// test-only modules) once per run, for the tests that need it.
func testCaddyBinary(t *testing.T) string {
	t.Helper()
	testCaddy.once.Do(func() {
		testCaddy.path, testCaddy.err = BuildCaddyPackage(buildDir, "./integration/internal/testcaddy", "testcaddy", raceEnabled)
	})
	if testCaddy.err != nil {
		t.Fatal(testCaddy.err)
	}
	return testCaddy.path
}

// writeRanges replaces the source's file in one step (a rename), so the
// source never reads half a file.
func writeRanges(t *testing.T, path string, lines ...string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestClientIPTrustedProxiesSource(t *testing.T) {
	ranges := filepath.Join(t.TempDir(), "ranges")
	writeRanges(t, ranges, "# the edge, not us yet", "192.0.2.0/24")
	c := StartCaddyWith(t, Options{Binary: testCaddyBinary(t), Env: []string{"RANGES=" + ranges}}, `
http://{$HOST}:{$HTTP_PORT} {
	log
	client_ip {
		trusted_proxies edgekit_test_file {
			path {$RANGES}
		}
		header X-Real-IP
	}
	respond "{client_ip} {http.client_ip.via_edge}"
}`)
	client := c.Client()

	// ask sends a request as an edge would and returns what Caddy made of
	// it: "<client_ip> <via_edge>".
	ask := func() string {
		t.Helper()
		resp, body := Get(t, client, c.URL("/"), "X-Real-IP", "203.0.113.7")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		return body
	}
	// becomes waits until the answer is want: the source re-reads the file
	// within 50ms of a change.
	becomes := func(step, want string) {
		t.Helper()
		var got string
		if !WaitFor(context.Background(), 5*time.Second, func() bool { got = ask(); return got == want }) {
			t.Fatalf("%s: Caddy answers %q, want %q", step, got, want)
		}
	}

	if got := ask(); got != "127.0.0.1 false" {
		t.Fatalf("loopback not in the ranges: %q, want the peer, not via the edge", got)
	}
	writeRanges(t, ranges, "192.0.2.0/24", "127.0.0.0/8")
	becomes("loopback added to the ranges", "203.0.113.7 true")
	writeRanges(t, ranges, "192.0.2.0/24")
	becomes("loopback removed again", "127.0.0.1 false")

	// A source that says everything is the edge is never believed. The
	// count is exported from the start (at 0), so wait for it to move.
	const refused = `caddy_client_ip_untrusted_total{action="allow",reason="source_covers_everything"}`
	if v := counterValue(t, c.Metrics(), refused); v != 0 {
		t.Fatalf("%s is %v before the source misbehaved", refused, v)
	}
	writeRanges(t, ranges, "127.0.0.0/8", "0.0.0.0/0")
	if !WaitFor(context.Background(), 5*time.Second, func() bool { ask(); return counterValue(t, c.Metrics(), refused) > 0 }) {
		t.Fatalf("%s never rose after the source returned 0.0.0.0/0; metrics:\n%s", refused, grepLines(c.Metrics(), "client_ip_untrusted"))
	}
	for range 5 {
		if got := ask(); got != "127.0.0.1 false" {
			t.Fatalf("source returning 0.0.0.0/0: Caddy answers %q, want the peer, not via the edge", got)
		}
	}
	// Caddy's log reaches the test through a pipe: wait for the line, then
	// make sure it stays the only one.
	const logLine = "covering every address"
	if !WaitFor(context.Background(), 5*time.Second, func() bool { return strings.Contains(c.Logs(), logLine) }) {
		t.Fatalf("no error line about the source covering every address")
	}
	time.Sleep(200 * time.Millisecond)
	if lines := grepLines(c.Logs(), logLine); strings.Count(lines, "\n") != 0 || !strings.Contains(lines, `"source":"http.ip_sources.edgekit_test_file"`) || !strings.Contains(lines, `"level":"error"`) {
		t.Errorf("want exactly one error line naming the source for all those requests, got:\n%s", lines)
	}
	writeRanges(t, ranges, "0.0.0.0/1", "128.0.0.0/1") // everything again, in two halves
	time.Sleep(200 * time.Millisecond)
	for range 3 {
		if got := ask(); got != "127.0.0.1 false" {
			t.Fatalf("source returning 0.0.0.0/1 and 128.0.0.0/1: Caddy answers %q, want the peer, not via the edge", got)
		}
	}

	// The source recovers: believed again, still without a reload.
	writeRanges(t, ranges, "127.0.0.1")
	becomes("the source recovered", "203.0.113.7 true")
	if n := counterValue(t, c.Metrics(), refused); n < 9 {
		t.Errorf("%s = %v, want at least the 9 requests refused", refused, n)
	}
	// No reload: the one config is the initial one, and nothing was posted
	// to the admin endpoint's /load.
	if n, loads := strings.Count(c.Logs(), `"msg":"serving initial configuration"`), grepLines(c.Logs(), `"uri":"/load"`); n != 1 || loads != "" {
		t.Errorf("initial configuration served %d times, loads %q: the ranges must change without a reload", n, loads)
	}
}
