package clientip

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// An ordered list of headers: the first present is read; a later one only
// when every earlier one is absent. Present but invalid (garbage, empty,
// a list, two lines) gives the peer: falling through would let the caller
// choose which header, and so which address, is believed.
func TestHeaderListOrder(t *testing.T) {
	const config = `{"trusted_proxies":["10.0.0.0/8"],"headers":["CF-Connecting-IP","True-Client-IP","X-Forwarded-For"]}`
	runResolveCases(t, config, []resolveCase{
		{"first present", edgePeer, []string{"CF-Connecting-IP", callerIP, "True-Client-IP", "6.6.6.6", "X-Forwarded-For", "6.6.6.7"}, callerIP, sourceHeader, 0},
		{"first absent, second read", edgePeer, []string{"True-Client-IP", "[2001:db8::7]:443", "X-Forwarded-For", "6.6.6.7"}, "2001:db8::7", sourceHeader, 0},
		{"neither: X-Forwarded-For as in list mode", edgePeer, []string{"X-Forwarded-For", "6.6.6.6, " + callerIP}, callerIP, sourceXFF, 0},
		{"none at all", edgePeer, nil, "10.0.0.1", sourcePeer, reasonShortChain},

		{"first garbage, second valid", edgePeer, []string{"CF-Connecting-IP", "garbage", "True-Client-IP", "6.6.6.6"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"first empty, second valid", edgePeer, []string{"CF-Connecting-IP", "", "True-Client-IP", "6.6.6.6"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"first a list, second valid", edgePeer, []string{"CF-Connecting-IP", "6.6.6.6, 203.0.113.7", "True-Client-IP", "6.6.6.6"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"first on two lines, second valid", edgePeer, []string{"CF-Connecting-IP", callerIP, "CF-Connecting-IP", "6.6.6.6", "True-Client-IP", "6.6.6.6"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"first with a zone", edgePeer, []string{"CF-Connecting-IP", "fe80::1%eth0", "X-Forwarded-For", "6.6.6.6"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"second garbage, X-Forwarded-For valid", edgePeer, []string{"True-Client-IP", "unknown", "X-Forwarded-For", "6.6.6.6"}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"not through the edge", strangers, []string{"CF-Connecting-IP", "6.6.6.6"}, "198.51.100.1", sourcePeer, reasonUntrustedHop},
	})
	// Without the X-Forwarded-For fallback, no header is no client.
	runResolveCases(t, `{"trusted_proxies":["10.0.0.0/8"],"headers":["CF-Connecting-IP","True-Client-IP"]}`, []resolveCase{
		{"none present", edgePeer, []string{"X-Forwarded-For", callerIP}, "10.0.0.1", sourcePeer, reasonInvalid},
		{"second", edgePeer, []string{"True-Client-IP", callerIP}, callerIP, sourceHeader, 0},
	})
	// With hops, the span is the same whichever is read.
	runResolveCases(t, `{"trusted_proxies":["10.0.0.0/8"],"hops":2,"headers":["CF-Connecting-IP","X-Forwarded-For"]}`, []resolveCase{
		{"header behind a trusted hop", edgePeer, []string{"CF-Connecting-IP", callerIP, "X-Forwarded-For", "6.6.6.6, 10.1.1.1"}, callerIP, sourceHeader, 0},
		{"header behind an untrusted hop", edgePeer, []string{"CF-Connecting-IP", "6.6.6.6", "X-Forwarded-For", callerIP}, "10.0.0.1", sourcePeer, reasonUntrustedHop},
		{"fallback behind a trusted hop", edgePeer, []string{"X-Forwarded-For", "6.6.6.6, 203.0.113.7, 10.1.1.1"}, callerIP, sourceXFF, 0},
		{"fallback behind an untrusted hop", edgePeer, []string{"X-Forwarded-For", "203.0.113.7, 6.6.6.6"}, "10.0.0.1", sourcePeer, reasonUntrustedHop},
	})
}

// Upstream, only the header read goes on, rewritten to the client; the
// other listed headers are removed, whoever wrote them.
func TestServeHeaderList(t *testing.T) {
	h := provision(t, `{"trusted_proxies":["10.0.0.0/8"],"headers":["X-Cdn-Client","True-Client-IP","X-Forwarded-For"],"strip":["X-Other"]}`)
	for _, tc := range []struct {
		name      string
		in        http.Header
		source    string
		xff, read string // the header read, rewritten
		gone      []string
	}{
		{"first", http.Header{"X-Cdn-Client": {"[2001:db8::7]:443"}, "True-Client-Ip": {"6.6.6.6"}, "X-Forwarded-For": {"6.6.6.7"}, "X-Other": {"x"}},
			"header", "2001:db8::7", "X-Cdn-Client", []string{"True-Client-Ip", "X-Other"}},
		{"second", http.Header{"True-Client-Ip": {" 203.0.113.7 "}, "X-Forwarded-For": {"6.6.6.7"}},
			"header", callerIP, "True-Client-Ip", []string{"X-Cdn-Client"}},
		{"fallback", http.Header{"X-Forwarded-For": {"6.6.6.6, 203.0.113.7"}},
			"xff", callerIP, "", []string{"X-Cdn-Client", "True-Client-Ip"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := serve(t, h, edgePeer, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			s.checkPlaceholders(t, "10.0.0.1", tc.source, "true", strings.Trim(tc.xff, " "))
			if got := s.header["X-Forwarded-For"]; !slices.Equal(got, []string{tc.xff}) {
				t.Errorf("X-Forwarded-For upstream %q, want %q", got, tc.xff)
			}
			if tc.read != "" {
				if got := s.header[tc.read]; !slices.Equal(got, []string{tc.xff}) {
					t.Errorf("%s upstream %q, want the client %s", tc.read, got, tc.xff)
				}
			}
			for _, name := range tc.gone {
				if v, ok := s.header[name]; ok {
					t.Errorf("%s went upstream: %q", name, v)
				}
			}
		})
	}
	// Not through the edge: all of them go.
	s, err := serve(t, h, strangers, http.Header{"X-Cdn-Client": {"6.6.6.6"}, "True-Client-Ip": {"6.6.6.6"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"X-Cdn-Client", "True-Client-Ip", "X-Forwarded-For"} {
		if v, ok := s.header[name]; ok {
			t.Errorf("not through the edge, %s went upstream: %q", name, v)
		}
	}
}

func TestHeaderListRefusals(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{`{"trusted_proxies":["10.0.0.0/8"],"header":"A","headers":["B","C"]}`, "header and headers are exclusive"},
		{`{"trusted_proxies":["10.0.0.0/8"],"headers":["X-Forwarded-For","CF-Connecting-IP"]}`, "X-Forwarded-For must come last"},
		{`{"trusted_proxies":["10.0.0.0/8"],"headers":["CF-Connecting-IP","cf-connecting-ip"]}`, "cf-connecting-ip is given twice"},
		{`{"trusted_proxies":["10.0.0.0/8"],"headers":["CF-Connecting-IP","Forwarded"]}`, "header Forwarded is a list"},
		{`{"trusted_proxies":["10.0.0.0/8"],"headers":["X-Forwarded-For"]}`, "header X-Forwarded-For is a list"},
		{`{"trusted_proxies":["10.0.0.0/8"],"headers":["CF-Connecting-IP","bad name"]}`, `header "bad name": not a valid header name`},
		{`{"trusted_proxies":["10.0.0.0/8"],"headers":["CF-Connecting-IP","X-Forwarded-For"],"forwarded":true}`, "header and forwarded are exclusive"},
	} {
		if _, err := tryProvision(tc.config); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.config, err, tc.want)
		}
	}
}
