package integration

import (
	"testing"
)

// TestServerTimingEarlyHints: after an upstream's 103, origin runs to the
// final response's header (hintsDelay later), not to the 103, and edge
// does not take the wait.
func TestServerTimingEarlyHints(t *testing.T) {
	c := startHostile(t)
	for _, p := range hostileProtocols(c) {
		t.Run(p.name, func(t *testing.T) {
			resp, _ := Get(t, p.client, c.HTTPSURL("/103"))
			e := timingEntries(t, resp.Header)
			if e["origin"].Dur < hintsDelay {
				t.Errorf("origin %v, less than the %v from the 103 to the 200", e["origin"].Dur, hintsDelay)
			}
			if e["edge"].Dur >= hintsDelay {
				t.Errorf("edge %v took the origin's wait after the 103", e["edge"].Dur)
			}
		})
	}
}
