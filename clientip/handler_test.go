package clientip

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// seen is what the next handler observed.
type seen struct {
	called   bool
	header   http.Header
	clientIP any
	trusted  any
	repl     map[string]string
}

// serve runs a GET from remoteAddr with header through h (serveRequest).
func serve(t *testing.T, h *Handler, remoteAddr string, header http.Header) (seen, error) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "http://example.com/", nil)
	r.RemoteAddr = remoteAddr
	r.Header = header
	return serveRequest(t, h, r)
}

// serveRequest runs r through h and reports what the next handler saw.
func serveRequest(t *testing.T, h *Handler, r *http.Request) (seen, error) {
	t.Helper()
	w := httptest.NewRecorder()
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, nil)
	var s seen
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		s.called = true
		s.header = r.Header.Clone()
		s.clientIP = caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey)
		s.trusted = caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey)
		s.repl = map[string]string{}
		repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		for _, key := range []string{"http.client_ip.peer", "http.client_ip.source", "http.client_ip.via_edge", "http.client_ip.reason"} {
			s.repl[key], _ = repl.GetString(key)
		}
		s.repl["client_ip"] = repl.ReplaceAll("{http.vars.client_ip}", "") // {client_ip} in a Caddyfile
		return nil
	})
	err := h.ServeHTTP(w, r, next)
	if err == nil && !s.called {
		t.Fatal("the handler neither refused nor called the next one")
	}
	return s, err
}

func (s seen) checkPlaceholders(t *testing.T, peer, source, viaEdge, clientIP string) {
	t.Helper()
	want := map[string]string{"http.client_ip.peer": peer, "http.client_ip.source": source, "http.client_ip.via_edge": viaEdge, "client_ip": clientIP}
	for k, v := range want {
		if s.repl[k] != v {
			t.Errorf("{%s} = %q, want %q", k, s.repl[k], v)
		}
	}
}

func TestServeThroughTheEdge(t *testing.T) {
	h := provision(t, `{"trusted_proxies":["10.0.0.0/8"],"secret":{"header":"X-Edge-Secret","value":"abc"}}`)
	s, err := serve(t, h, "10.0.0.1:4711", hdr(
		"X-Forwarded-For", "6.6.6.6, 198.51.100.9",
		"X-Forwarded-For", "203.0.113.7",
		"X-Edge-Secret", "abc",
		"CF-Connecting-IP", "203.0.113.7",
	))
	if err != nil || !s.called {
		t.Fatalf("err %v, next called %v", err, s.called)
	}
	if s.clientIP != "203.0.113.7" || s.trusted != true {
		t.Errorf("vars client_ip=%v trusted_proxy=%v, want 203.0.113.7 true", s.clientIP, s.trusted)
	}
	s.checkPlaceholders(t, "10.0.0.1", "xff", "true", "203.0.113.7")
	if got := s.header.Values("X-Forwarded-For"); len(got) != 1 || got[0] != "203.0.113.7" {
		t.Errorf("X-Forwarded-For %q, want [203.0.113.7]: what the edge did not vouch for is dropped", got)
	}
	if s.header.Get("X-Edge-Secret") != "" {
		t.Errorf("the secret header went on")
	}
	// client_ip read X-Forwarded-For, not CF-Connecting-IP: whoever wrote
	// it, it is not what the edge was believed for.
	if v := s.header.Values("CF-Connecting-IP"); v != nil {
		t.Errorf("CF-Connecting-IP %q went on, though client_ip did not read it", v)
	}
}

// callerAddressHeaders are what a caller writes to pose as someone else,
// and what CDNs relay as written.
var callerAddressHeaders = []string{"X-Real-IP", "True-Client-IP", "CF-Connecting-IP", "Fastly-Client-IP",
	"X-Client-IP", "X-Cluster-Client-IP", "Client-IP", "Forwarded",
	"CloudFront-Viewer-Address", "X-Envoy-External-Address", "X-Originating-IP", "X-Remote-IP",
	"X-Remote-Addr", "X-ProxyUser-Ip", "X-Forwarded", "Forwarded-For", "X-Original-Forwarded-For"}

// Through the edge, in every mode, the only client-address headers that go
// on are the ones written from the resolved client: X-Forwarded-For
// starting at the client, the configured header holding just the client,
// Forwarded from the client's element in Forwarded mode.
func TestServeThroughTheEdgeStripsCallerAddressHeaders(t *testing.T) {
	spoofed := func(extra ...string) http.Header {
		h := http.Header{}
		for _, name := range callerAddressHeaders {
			h.Set(name, "6.6.6.6")
		}
		h.Set("Forwarded", "for=6.6.6.6")
		h.Set("X-Forwarded-Host", "edge.example") // the edge's: kept
		h.Set("X-Forwarded-Proto", "https")
		for i := 0; i+1 < len(extra); i += 2 {
			h[http.CanonicalHeaderKey(extra[i])] = append(h[http.CanonicalHeaderKey(extra[i])], extra[i+1])
		}
		return h
	}
	for _, tc := range []struct {
		name, config string
		header       http.Header
		want         map[string][]string // headers rewritten; every other caller address header must be gone
	}{
		{"xff", `{"trusted_proxies":["10.0.0.0/8"]}`, spoofed("X-Forwarded-For", "6.6.6.6, 203.0.113.7"),
			map[string][]string{"X-Forwarded-For": {"203.0.113.7"}}},
		{"header", `{"trusted_proxies":["10.0.0.0/8"],"header":"CF-Connecting-IP"}`,
			func() http.Header {
				h := spoofed("X-Forwarded-For", "6.6.6.6")
				h.Set("CF-Connecting-IP", " [2001:db8::7]:443")
				return h
			}(),
			map[string][]string{"X-Forwarded-For": {"2001:db8::7"}, "Cf-Connecting-Ip": {"2001:db8::7"}}},
		{"forwarded", `{"trusted_proxies":["10.0.0.0/8"],"forwarded":true,"hops":2}`,
			func() http.Header {
				h := spoofed("X-Forwarded-For", "6.6.6.6")
				h["Forwarded"] = []string{"for=6.6.6.6", `for=7.7.7.7, for="203.0.113.7:4711";proto=https`, "for=10.1.1.1"}
				return h
			}(),
			map[string][]string{"X-Forwarded-For": {"203.0.113.7"}, "Forwarded": {`for="203.0.113.7:4711";proto=https`, "for=10.1.1.1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := provision(t, tc.config)
			s, err := serve(t, h, "10.0.0.1:4711", tc.header)
			if err != nil || s.trusted != true {
				t.Fatalf("err %v trusted_proxy %v, want through the edge", err, s.trusted)
			}
			for _, name := range append(callerAddressHeaders, "X-Forwarded-For") {
				name = http.CanonicalHeaderKey(name)
				if got, want := s.header[name], tc.want[name]; !slices.Equal(got, want) {
					t.Errorf("%s %q went on, want %q", name, got, want)
				}
			}
			if s.header.Get("X-Forwarded-Host") != "edge.example" || s.header.Get("X-Forwarded-Proto") != "https" {
				t.Errorf("the edge's X-Forwarded-Host/-Proto were dropped: %v", s.header)
			}
		})
	}
}

func TestServeXFFTrimmedToTheVouchedPart(t *testing.T) {
	h := provision(t, `{"trusted_proxies":["10.0.0.0/8"],"hops":3}`)
	for _, tc := range []struct {
		lines []string
		want  []string
	}{
		{[]string{"6.6.6.6,203.0.113.7, 10.1.1.1,10.2.2.2"}, []string{"203.0.113.7, 10.1.1.1,10.2.2.2"}},
		{[]string{"6.6.6.6", "  203.0.113.7", "10.1.1.1, 10.2.2.2"}, []string{"203.0.113.7", "10.1.1.1, 10.2.2.2"}},
		{[]string{"203.0.113.7, 10.1.1.1", "10.2.2.2"}, []string{"203.0.113.7, 10.1.1.1", "10.2.2.2"}},
	} {
		header := http.Header{"X-Forwarded-For": tc.lines}
		s, _ := serve(t, h, "10.0.0.1:1", header)
		if got := s.header["X-Forwarded-For"]; !slices.Equal(got, tc.want) || s.clientIP != "203.0.113.7" {
			t.Errorf("%q: X-Forwarded-For %q client %v, want %q 203.0.113.7", tc.lines, got, s.clientIP, tc.want)
		}
	}
}

func TestServeHeaderModeSetsXFFToClient(t *testing.T) {
	h := provision(t, `{"trusted_proxies":["10.0.0.0/8"],"header":"CF-Connecting-IP"}`)
	s, _ := serve(t, h, "10.0.0.1:1", hdr("CF-Connecting-IP", "[2001:db8::7]:1234", "X-Forwarded-For", "6.6.6.6, 7.7.7.7"))
	if s.clientIP != "2001:db8::7" || s.repl["http.client_ip.source"] != "header" {
		t.Errorf("client %v source %s", s.clientIP, s.repl["http.client_ip.source"])
	}
	if got := s.header["X-Forwarded-For"]; !slices.Equal(got, []string{"2001:db8::7"}) {
		t.Errorf("X-Forwarded-For %q, want just the client", got)
	}
	s, _ = serve(t, h, "10.0.0.1:1", hdr("CF-Connecting-IP", "203.0.113.7"))
	if got := s.header["X-Forwarded-For"]; !slices.Equal(got, []string{"203.0.113.7"}) {
		t.Errorf("X-Forwarded-For %q, want just the client", got)
	}
}

func TestServeNotThroughTheEdge(t *testing.T) {
	h := provision(t, `{"trusted_proxies":["10.0.0.0/8"],"header":"X-Client","secret":{"header":"X-Edge-Secret","value":"abc"}}`)
	header := hdr(
		"X-Forwarded-For", "6.6.6.6",
		"X-Edge-Secret", "wrong",
		"X-Client", "6.6.6.6",
		"X-Real-IP", "6.6.6.6",
		"True-Client-IP", "6.6.6.6",
		"CF-Connecting-IP", "6.6.6.6",
		"Fastly-Client-IP", "6.6.6.6",
		"Forwarded", "for=6.6.6.6",
		"X-Other", "kept",
	)
	s, err := serve(t, h, "[::ffff:198.51.100.1]:4711", header)
	if err != nil || !s.called {
		t.Fatalf("err %v called %v", err, s.called)
	}
	if s.clientIP != "198.51.100.1" || s.trusted != false {
		t.Errorf("vars client_ip=%v trusted_proxy=%v, want the peer and false", s.clientIP, s.trusted)
	}
	s.checkPlaceholders(t, "198.51.100.1", "peer", "false", "198.51.100.1")
	for _, name := range []string{"X-Edge-Secret", "X-Client", "X-Real-IP", "True-Client-IP", "CF-Connecting-IP", "Fastly-Client-IP", "Forwarded"} {
		if v := s.header.Get(name); v != "" {
			t.Errorf("%s: %q reached the next handler", name, v)
		}
	}
	if s.header.Get("X-Other") != "kept" {
		t.Errorf("unrelated headers changed: %v", s.header)
	}
}

// Not through the edge, the whole forwarding chain is the caller's and is
// removed, so reverse_proxy starts it afresh from the peer even where its
// own trusted_proxies (or Caddy's) covers the peer and would extend it.
func TestServeNotThroughTheEdgeDropsTheChain(t *testing.T) {
	for _, config := range []string{
		`{"trusted_proxies":["10.0.0.0/8"]}`,
		`{"trusted_proxies":["10.0.0.0/8"],"strip":["X-Other"]}`,   // a strip list does not bring them back
		`{"sign":{"key":{"id":"k1","secret":"` + testKey1 + `"}}}`, // a PoP with nothing in front
	} {
		h := provision(t, config)
		s, err := serve(t, h, "198.51.100.1:4711", hdr(
			"X-Forwarded-For", "6.6.6.6",
			"X-Forwarded-Host", "evil.example",
			"X-Forwarded-Proto", "https",
			"Forwarded", "for=6.6.6.6;host=evil.example",
			"X-Unrelated", "kept",
		))
		if err != nil || s.trusted != false {
			t.Fatalf("%s: err %v trusted_proxy %v", config, err, s.trusted)
		}
		for _, name := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded"} {
			if v, ok := s.header[name]; ok {
				t.Errorf("%s: the caller's %s %q went on", config, name, v)
			}
		}
		if s.header.Get("X-Unrelated") != "kept" {
			t.Errorf("%s: unrelated header dropped", config)
		}
	}
}

func TestServeReject(t *testing.T) {
	for _, tc := range []struct {
		config string
		status int
	}{
		{`{"trusted_proxies":["10.0.0.0/8"],"untrusted":"reject"}`, 403},
		{`{"trusted_proxies":["10.0.0.0/8"],"untrusted":"reject","reject_status":421}`, 421},
	} {
		h := provision(t, tc.config)
		before := testutil.ToFloat64(metrics.untrusted.WithLabelValues("untrusted_hop", "reject"))
		s, err := serve(t, h, "198.51.100.1:1", hdr("X-Forwarded-For", "10.0.0.1"))
		var herr caddyhttp.HandlerError
		if !errors.As(err, &herr) || herr.StatusCode != tc.status || s.called {
			t.Errorf("%s: err %v (next called %v), want a %d handler error", tc.config, err, s.called, tc.status)
		}
		if after := testutil.ToFloat64(metrics.untrusted.WithLabelValues("untrusted_hop", "reject")); after != before+1 {
			t.Errorf("untrusted_total{reason=untrusted_hop,action=reject} went %v -> %v", before, after)
		}
		if s, err := serve(t, h, "10.0.0.1:1", hdr("X-Forwarded-For", "203.0.113.7")); err != nil || !s.called {
			t.Errorf("%s: a request through the edge was refused: %v", tc.config, err)
		}
	}
}

func TestServeObserveCounts(t *testing.T) {
	h := provision(t, `{"trusted_proxies":["10.0.0.0/8"],"untrusted":"observe"}`)
	count := func(reason string) float64 {
		return testutil.ToFloat64(metrics.untrusted.WithLabelValues(reason, "observe"))
	}
	peer := testutil.ToFloat64(metrics.requests.WithLabelValues("peer"))
	xff := testutil.ToFloat64(metrics.requests.WithLabelValues("xff"))
	short, invalid := count("short_chain"), count("invalid_address")

	for _, header := range []http.Header{hdr(), hdr("X-Forwarded-For", "garbage"), hdr("X-Forwarded-For", "203.0.113.7")} {
		s, err := serve(t, h, "10.0.0.1:1", header)
		if err != nil || !s.called {
			t.Fatalf("observe refused a request: %v", err)
		}
	}
	if d := count("short_chain") - short; d != 1 {
		t.Errorf("short_chain counted %v times, want 1", d)
	}
	if d := count("invalid_address") - invalid; d != 1 {
		t.Errorf("invalid_address counted %v times, want 1", d)
	}
	if d := testutil.ToFloat64(metrics.requests.WithLabelValues("peer")) - peer; d != 2 {
		t.Errorf("requests_total{source=peer} +%v, want +2", d)
	}
	if d := testutil.ToFloat64(metrics.requests.WithLabelValues("xff")) - xff; d != 1 {
		t.Errorf("requests_total{source=xff} +%v, want +1", d)
	}
}

func TestMetricsSurviveAReload(t *testing.T) {
	// Two configs, each with two handlers sharing its registry, must
	// provision without a duplicate-registration error.
	for range 2 {
		ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
		for range 2 {
			h := &Handler{TrustedProxies: []string{"10.0.0.0/8"}}
			if err := h.Provision(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := testutil.GatherAndCount(ctx.GetMetricsRegistry(), "caddy_client_ip_requests_total", "caddy_client_ip_untrusted_total"); err != nil || n == 0 {
			t.Errorf("registry has %d client_ip series (%v)", n, err)
		}
		cancel()
	}
}
