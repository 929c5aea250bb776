package integration

import (
	"net/http"
	"slices"
	"testing"
)

// TestServerTimingUpstreamTrailerH1: over HTTP/1.1 an upstream's declared
// Server-Timing trailer reaches the client with the upstream's entries
// alone (no trailer of the PoP's on HTTP/1.1), its other trailer too.
func TestServerTimingUpstreamTrailerH1(t *testing.T) {
	c := startHostile(t)
	for _, tc := range []struct {
		name   string
		client *http.Client
		url    string
	}{{"plain", c.Client(), c.URL("/own-trailer")}, {"tls", h1TLSClient(c), c.HTTPSURL("/own-trailer")}} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := Get(t, tc.client, tc.url)
			if resp.StatusCode != http.StatusOK || body != "x\n" || resp.ProtoMajor != 1 {
				t.Fatalf("%d %s %q", resp.StatusCode, resp.Proto, body)
			}
			if got := fieldsNamed(resp.Trailer, "Server-Timing"); !slices.Equal(got, []string{"uptrail;dur=1"}) {
				t.Errorf("trailer Server-Timing %q, want the upstream's alone", got)
			}
			if resp.Trailer.Get("X-Up-Trailer") != "yes" {
				t.Errorf("the upstream's other trailer is lost: %v", resp.Trailer)
			}
			if e := timingEntries(t, resp.Header); !e["edge"].HasDur {
				t.Errorf("no header entries: %v", resp.Header)
			}
		})
	}
}
