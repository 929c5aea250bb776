package integration

import (
	"testing"
)

// TestServerTimingNested: a server_timing inside one that already times
// the request adds nothing: one set of entries, the outer's
// Timing-Allow-Origin (none).
func TestServerTimingNested(t *testing.T) {
	c := startHostile(t)
	resp, _ := Get(t, c.Client(), c.URL("/twice/fixed"))
	e := timingEntries(t, resp.Header) // fails on a name twice
	if !e["edge"].HasDur || !e["origin"].HasDur {
		t.Errorf("entries %v", resp.Header)
	}
	if v := fieldsNamed(resp.Header, "Timing-Allow-Origin"); v != nil {
		t.Errorf("the inner directive's Timing-Allow-Origin %q was sent", v)
	}
}
