package integration

import (
	"slices"
	"testing"
)

// TestServerTimingUpstreamForgedNames: the upstream's Server-Timing
// entries named as the PoP's (any case) are dropped from the header and the
// trailer, its other entries kept as sent (a quoted comma included), so
// that the first entry of each name is the PoP's own.
func TestServerTimingUpstreamForgedNames(t *testing.T) {
	c := startHostile(t)
	for _, p := range hostileProtocols(c) {
		t.Run(p.name, func(t *testing.T) {
			resp, _ := Get(t, p.client, c.HTTPSURL("/forge"))
			e := timingEntries(t, resp.Header) // fails on a name twice
			if !slices.Equal(names(e), []string{"app", "client", "edge", "origin", "origin-conn", "origin-dial", "rtt"}) &&
				!slices.Equal(names(e), []string{"app", "client", "edge", "origin", "origin-conn", "rtt"}) {
				t.Errorf("header entries %v (%v)", names(e), resp.Header)
			}
			if e["app"].Desc != "a, edge;dur=1" {
				t.Errorf("the upstream's own entry changed: %+v", e["app"])
			}
			if want := p.name + " tls=new"; e["client"].Desc != want {
				t.Errorf("client %q, want %q", e["client"].Desc, want)
			}
			if p.name == "h1" {
				return
			}
			resp, _ = Get(t, p.client, c.HTTPSURL("/forged-trailer"))
			if n := names(timingEntries(t, resp.Trailer)); !slices.Equal(n, []string{"total", "uptrail"}) {
				t.Errorf("trailer entries %v (%v), want the upstream's uptrail and the PoP's total", n, resp.Trailer)
			}
			if tr := timingEntries(t, resp.Trailer); tr["total"].Dur <= 0 {
				t.Errorf("total %v: the upstream's total;dur=0 was kept", tr["total"])
			}
		})
	}
	t.Run("h1 trailer", func(t *testing.T) {
		resp, _ := Get(t, c.Client(), c.URL("/forged-trailer"))
		if got := fieldsNamed(resp.Trailer, "Server-Timing"); !slices.Equal(got, []string{"uptrail;dur=1"}) {
			t.Errorf("trailer Server-Timing %q, want uptrail alone", got)
		}
	})
}
