package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServerTimingLogNoQuery: the debug line says the request's path, not
// its query (which may carry secrets, and which Caddy's access-log filters
// do not reach here).
func TestServerTimingLogNoQuery(t *testing.T) {
	c := startHostile(t)
	resp, _ := Get(t, c.Client(), c.URL("/logged/fixed?token=s3cr3t"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var line string
	if !WaitFor(t.Context(), 10*time.Second, func() bool {
		line = grepLines(c.Logs(), `"path":"/logged/fixed"`)
		return strings.Contains(line, "server timing")
	}) {
		t.Fatalf("no server timing line with the path: %s", grepLines(c.Logs(), "server timing"))
	}
	if strings.Contains(grepLines(c.Logs(), "server timing"), "s3cr3t") {
		t.Errorf("the query reached the log: %s", line)
	}
}
