package clientip

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// The fuzz targets share one invariant set: resolving never panics, the
// client is always the peer or a member of what the caller sent, and a
// request whose peer is not the edge never gets a header-derived client.

const (
	fuzzEdgePeer = "10.0.0.1:4711"
	fuzzStranger = "198.51.100.1:4711"
)

// handlersByHops provisions, on first use, one handler per hops value from
// a config format with a %d for hops.
type handlersByHops struct {
	format string
	cache  map[int]*Handler
}

func (hs *handlersByHops) get(t *testing.T, hops uint8) (*Handler, int) {
	n := int(hops%maxHops) + 1
	if !strings.Contains(hs.format, "%d") { // recursive: no hops
		n = 0
	}
	if hs.cache[n] == nil {
		config := hs.format
		if n > 0 {
			config = fmt.Sprintf(hs.format, n)
		}
		hs.cache[n] = provision(t, config)
	}
	return hs.cache[n], n
}

func checkBypass(t *testing.T, h *Handler, header http.Header) {
	res := h.resolver.resolve(fuzzStranger, header)
	if res.viaEdge() || res.client.String() != "198.51.100.1" {
		t.Fatalf("a caller outside the edge got client %s (via_edge %v) from %q", res.client, res.viaEdge(), header)
	}
}

// FuzzForwardedFor checks X-Forwarded-For resolution against a plain
// reference: join the lines, split on commas, drop empty members, append
// the peer, and read the chain from the right.
func FuzzForwardedFor(f *testing.F) {
	for _, seed := range []struct {
		line1, line2 string
		hops         uint8
	}{
		{"203.0.113.7", "", 1},
		{"garbage, 203.0.113.7", "10.1.1.1", 2},
		{"[2001:db8::1]:443, 10.1.1.1:80", "", 2},
		{"::ffff:203.0.113.7, , unknown", "_obf", 3},
		{"203.0.113.7,10.1.1.1", "10.2.2.2, [::ffff:10.3.3.3]:9", 4},
		{strings.Repeat("1.1.1.1,", 70), "", 1},
		{"fe80::1%eth0", "\t10.1.1.1 ", 2},
		{"10.9.9.9, 203.0.113.7", "10.1.1.1, ::ffff:10.2.2.2", 128}, // recursive from here on
		{"203.0.113.7, junk", "10.1.1.1", 130},
		{"10.1.1.1, ,10.2.2.2", "", 129},
		{"x 203.0.113.7", "10.1.1.1", 131},
		{strings.Repeat("10.1.1.1,", 16), "10.1.1.1", 140},
	} {
		f.Add(seed.line1, seed.line2, seed.hops)
	}
	handlers := handlersByHops{`{"trusted_proxies":["10.0.0.0/8"],"hops":%d}`, map[int]*Handler{}}
	recursive := handlersByHops{`{"trusted_proxies":["10.0.0.0/8"],"recursive":true}`, map[int]*Handler{}}
	f.Fuzz(func(t *testing.T, line1, line2 string, hops uint8) {
		h, n := handlers.get(t, hops)
		if hops >= 128 {
			h, _ = recursive.get(t, 0)
		}
		header := http.Header{"X-Forwarded-For": {line1, line2}}
		res := h.resolver.resolve(fuzzEdgePeer, header)

		// Reference. The caps count the fields from the right through the
		// client's; the byte cap is left to FuzzCallerPrefix and the unit
		// tests.
		if len(line1)+len(line2) > maxChainBytes {
			return
		}
		fields := strings.Split(line1+","+line2, ",")
		if hops >= 128 {
			// Recursive: from the right, skip trusted addresses; the
			// first address outside is the client, anything unreadable
			// before it or more than maxHops-1 trusted ones the peer.
			want, wantVia := netip.MustParseAddr("10.0.0.1"), false
			members := 0
			for i, parsed := len(fields)-1, 1; i >= 0 && parsed <= maxChainFields; i, parsed = i-1, parsed+1 {
				field := strings.Trim(fields[i], " \t")
				if field == "" {
					continue
				}
				members++
				addr, _, valid := parseNode(field)
				if !valid {
					break
				}
				if !netip.MustParsePrefix("10.0.0.0/8").Contains(addr) {
					want, wantVia = addr, true
					break
				}
				if members == maxHops {
					break
				}
			}
			if res.client != want || res.viaEdge() != wantVia {
				t.Fatalf("XFF %q %q recursive: got %s via_edge %v (%q), reference %s %v", line1, line2, res.client, res.viaEdge(), res.reason, want, wantVia)
			}
			checkBypass(t, h, http.Header{"X-Forwarded-For": {line1, line2}})
			return
		}
		var chain []string
		parsed := 0
		for i := len(fields) - 1; i >= 0 && len(chain) < n; i-- {
			parsed++
			if field := strings.Trim(fields[i], " \t"); field != "" {
				chain = append([]string{field}, chain...)
			}
		}
		want, wantVia := netip.MustParseAddr("10.0.0.1"), false
		if parsed <= maxChainFields && len(chain) >= n {
			ok := true
			for i := 1; i < n; i++ { // the span, peer excluded
				addr, _, valid := parseNode(chain[len(chain)-i])
				ok = ok && valid && netip.MustParsePrefix("10.0.0.0/8").Contains(addr)
			}
			if client, _, valid := parseNode(chain[len(chain)-n]); ok && valid {
				want, wantVia = client, true
			}
		}
		if res.client != want || res.viaEdge() != wantVia {
			t.Fatalf("XFF %q %q hops %d: got %s via_edge %v, reference %s %v", line1, line2, n, res.client, res.viaEdge(), want, wantVia)
		}
		if res.viaEdge() {
			// The trimmed header starts with the client entry.
			lines := header["X-Forwarded-For"]
			rewriteChain(header, &res, res.client.String())
			first := strings.TrimLeft(strings.Join(header["X-Forwarded-For"], ","), " \t")
			if addr, _, ok := parseNode(strings.Trim(strings.SplitN(first, ",", 2)[0], " \t")); !ok || addr != res.client {
				t.Fatalf("XFF %q trimmed to %q, which does not start with the client %s", lines, header["X-Forwarded-For"], res.client)
			}
		}
		checkBypass(t, h, http.Header{"X-Forwarded-For": {line1, line2}})
	})
}

// FuzzForwardedHeader checks RFC 7239 Forwarded resolution: the client is
// the peer or an address whose text the caller sent inside a for= node.
func FuzzForwardedHeader(f *testing.F) {
	for _, seed := range []struct {
		line1, line2 string
		hops         uint8
	}{
		{"for=203.0.113.7", "", 1},
		{`for="[2001:db8:cafe::17]:4711";proto=https`, `for=10.1.1.1`, 2},
		{`for="a,b", For=203.0.113.7;by=_x`, "", 1},
		{`for=unknown, for="_gazonk:_p"`, `for="\"x"`, 2},
		{`for="203.0.113.7`, "", 1},
		{" , ;;, for=203.0.113.7 , ", "for=10.1.1.1;for=10.1.1.2", 2},
	} {
		f.Add(seed.line1, seed.line2, seed.hops)
	}
	handlers := handlersByHops{`{"trusted_proxies":["10.0.0.0/8"],"forwarded":true,"hops":%d}`, map[int]*Handler{}}
	f.Fuzz(func(t *testing.T, line1, line2 string, hops uint8) {
		h, _ := handlers.get(t, hops)
		header := http.Header{"Forwarded": {line1, line2}}
		res := h.resolver.resolve(fuzzEdgePeer, header)
		if !res.viaEdge() {
			if res.client.String() != "10.0.0.1" {
				t.Fatalf("not via the edge but client %s", res.client)
			}
		} else {
			if res.source != sourceForwarded {
				t.Fatalf("source %s", res.source)
			}
			if !strings.Contains(line1, res.clientText) && !strings.Contains(line2, res.clientText) {
				t.Fatalf("client text %q is not in the Forwarded lines %q %q", res.clientText, line1, line2)
			}
			if addr, err := netip.ParseAddr(res.clientText); err != nil || addr.Unmap() != res.client {
				t.Fatalf("client %s does not come from its text %q", res.client, res.clientText)
			}
			if !strings.Contains(strings.ToLower(line1+line2), "for=") {
				t.Fatalf("a client without any for= parameter in %q %q", line1, line2)
			}
			// The trimmed Forwarded starts with the client's element.
			header := http.Header{"Forwarded": {line1, line2}}
			rewriteChain(header, &res, res.client.String())
			trimmed := header["Forwarded"]
			if len(trimmed) == 0 {
				t.Fatalf("Forwarded %q %q trimmed away", line1, line2)
			}
			if m, _, _ := forwardedElement(trimmed[0], 0); !m.valid || m.addr != res.client {
				t.Fatalf("Forwarded %q %q trimmed to %q, which does not start with the client %s", line1, line2, trimmed, res.client)
			}
			if xff := header["X-Forwarded-For"]; len(xff) != 1 || xff[0] != res.client.String() {
				t.Fatalf("X-Forwarded-For upstream %q, want just the client %s", xff, res.client)
			}
		}
		checkBypass(t, h, http.Header{"Forwarded": {line1, line2}})
	})
}

// FuzzSingleHeader checks header mode against the standard library: a
// value is believed exactly when netip parses it as an address, an
// address:port, or a bracketed IPv6 address, without a zone.
func FuzzSingleHeader(f *testing.F) {
	for _, seed := range []string{
		"203.0.113.7", "203.0.113.7:443", "[2001:db8::1]:443", "[2001:db8::1]", "2001:db8::1",
		"::ffff:203.0.113.7", "[::ffff:203.0.113.7]:80", "[203.0.113.7]:80", "unknown", "_x",
		"1.2.3.4, 5.6.7.8", "fe80::1%eth0", "[fe80::1%25eth0]:80", "1.2.3.4:", "1.2.3.4:99999", " 1.2.3.4\t",
	} {
		f.Add(seed)
	}
	var h *Handler
	f.Fuzz(func(t *testing.T, value string) {
		if h == nil {
			h = provision(t, `{"trusted_proxies":["10.0.0.0/8"],"header":"X-Client"}`)
		}
		res := h.resolver.resolve(fuzzEdgePeer, http.Header{"X-Client": {value}})

		tok := strings.Trim(value, " \t")
		var want netip.Addr
		if addr, err := netip.ParseAddr(tok); err == nil {
			want = addr
		} else if ap, err := netip.ParseAddrPort(tok); err == nil {
			want = ap.Addr()
		} else if len(tok) > 2 && tok[0] == '[' && tok[len(tok)-1] == ']' {
			if addr, err := netip.ParseAddr(tok[1 : len(tok)-1]); err == nil && addr.Is6() {
				want = addr
			}
		}
		if want.Zone() != "" {
			want = netip.Addr{}
		}
		want, wantVia := want.Unmap(), want.IsValid()
		if !wantVia {
			want = netip.MustParseAddr("10.0.0.1")
		}
		if res.client != want || res.viaEdge() != wantVia {
			t.Fatalf("header %q: got %s via_edge %v, reference %s", value, res.client, res.viaEdge(), want)
		}
		checkBypass(t, h, http.Header{"X-Client": {value}})
	})
}

// FuzzCallerPrefix asserts the property behind issue 14, item 3: whatever a
// caller writes left of the client entry (any bytes, any number of members
// or header lines) changes neither the client, nor whether the request came
// through the edge, nor why not, nor the X-Forwarded-For sent upstream. The
// edge's part is `edge` ('\n' separates header lines); the caller's prefix
// goes on lines of its own or on the edge's first line, before ", " or ",",
// as edges append. When the edge's part alone is too short to hold the
// client, the client comes from the prefix and there is nothing to compare.
func FuzzCallerPrefix(f *testing.F) {
	for _, seed := range []struct {
		prefix, edge string
		hops, mode   uint8
	}{
		{strings.Repeat(",", 64), "6.6.6.6", 0, 0},             // 64 empty members
		{strings.Repeat("x", 8<<10), "6.6.6.6", 0, 2},          // 8 KiB of junk
		{strings.Repeat("1.1.1.1\n", 80), "6.6.6.6", 0, 0},     // many header lines
		{strings.Repeat(" ", 9000), "6.6.6.6\n10.1.1.1", 1, 2}, // spaces, two hops over two lines
		{`for="oops;`, "for=6.6.6.6", 0, 1},                    // Forwarded: an unterminated quote
		{strings.Repeat("for=1.1.1.1,", 70), `for="[2001:db8::1]:80";proto=https`, 0, 1},
		{"x", " 6.6.6.6", 0, 2}, // header mode
		{"junk", "unknown", 0, 0},
		{"", "6.6.6.6" + strings.Repeat(",", 63), 0, 0},
		{"", "6.6.6.6" + strings.Repeat(" ", 8185), 0, 0},
		// recursive (mode 16 + 0: X-Forwarded-For, 16 + 1: Forwarded)
		{"10.9.9.9, 10.8.8.8", "6.6.6.6\n10.1.1.1", 0, 48},            // trusted-looking prefix, own lines
		{strings.Repeat("10.1.1.1,", 70), "6.6.6.6, 10.2.2.2", 0, 24}, // on the edge's line, ","
		{"junk", "10.1.1.1", 0, 16},                                   // no client in the edge's part
		{"x", " 6.6.6.6 ,\t10.1.1.1", 0, 16},                          // the separator's whitespace
		{"", "6.6.6.6" + strings.Repeat(",10.1.1.1", 15), 0, 16},      // 15 trusted hops
		{`for="oops`, "for=6.6.6.6, for=10.1.1.1", 0, 49},
		{strings.Repeat("for=10.1.1.1,", 20), `for="[2001:db8::1]:80"`, 0, 17},
	} {
		f.Add(seed.prefix, seed.edge, seed.hops, seed.mode)
	}
	configs := []string{
		`{"trusted_proxies":["10.0.0.0/8"],"hops":%d}`,
		`{"trusted_proxies":["10.0.0.0/8"],"forwarded":true,"hops":%d}`,
		`{"trusted_proxies":["10.0.0.0/8"],"header":"X-Client","hops":%d}`,
		// recursive, for X-Forwarded-For and Forwarded (mode/16 odd)
		`{"trusted_proxies":["10.0.0.0/8"],"recursive":true}`,
		`{"trusted_proxies":["10.0.0.0/8"],"forwarded":true,"recursive":true}`,
	}
	handlers := make([]handlersByHops, len(configs))
	for i, format := range configs {
		handlers[i] = handlersByHops{format, map[int]*Handler{}}
	}
	f.Fuzz(func(t *testing.T, prefix, edge string, hops, mode uint8) {
		kind := int(mode) % 3
		name := "X-Forwarded-For"
		if kind == 1 {
			name = "Forwarded"
		}
		if mode/16%2 == 1 && kind != 2 { // header mode takes no recursive
			kind += 3
		}
		h, n := handlers[kind].get(t, hops%4) // deep chains add little but time
		sep := ", "
		if mode/8%2 == 1 {
			sep = ","
		}
		edgeLines := strings.Split(edge, "\n")
		alone := http.Header{name: edgeLines, "X-Client": {"203.0.113.7"}}
		want := h.resolver.resolve(fuzzEdgePeer, alone)
		if want.reason == reasonShortChain {
			return
		}
		padded := http.Header{name: joinLines(strings.Split(prefix, "\n"), edgeLines, mode/4%2 == 0, sep), "X-Client": {"203.0.113.7"}}
		got := h.resolver.resolve(fuzzEdgePeer, padded)
		if got.client != want.client || got.source != want.source || got.reason != want.reason {
			t.Fatalf("hops %d, %s %q: client %s source %s reason %q; with the caller's prefix %q: client %s source %s reason %q",
				n, name, edge, want.client, want.source, want.reason, prefix, got.client, got.source, got.reason)
		}
		if want.viaEdge() {
			rewriteChain(alone, &want, want.client.String())
			rewriteChain(padded, &got, got.client.String())
			for _, name := range []string{"X-Forwarded-For", "Forwarded", "X-Client"} {
				if !slices.Equal(alone[name], padded[name]) {
					t.Fatalf("%s upstream: %q alone, %q with the caller's prefix %q", name, alone[name], padded[name], prefix)
				}
			}
		}
	})
}

// FuzzAssertionHeader checks the signed header's parser: it never panics,
// what it accepts is written back to the same text from its fields (one
// text per assertion), and the origin accepts nothing but what the PoP's
// signer writes for that request.
func FuzzAssertionHeader(f *testing.F) {
	pop := popHandler(f, "k1", testKey1)
	r := newRequest("GET", "http://shop.example/p?q=1", popPeer)
	good := pop.signer.sign(phone, r)
	for _, seed := range []string{
		good,
		pop.signer.sign("2001:db8::7", r),
		"v1 ip=203.0.113.7 t=0 kid=k1 sig=" + strings.Repeat("A", sigChars),
		"v1 ip=::ffff:1.2.3.4 t=1 kid=k1 sig=" + strings.Repeat("_", sigChars),
		"v1 ip=fe80::1%eth0 t=1 kid=k1 sig=" + strings.Repeat("-", sigChars),
		"v1 ip=203.0.113.7 t=01 kid=k1 sig=" + strings.Repeat("A", sigChars),
		"v1 ip=203.0.113.7  t=1 kid=k1 sig=" + strings.Repeat("A", sigChars),
		"v1 ip=203.0.113.7 t=1 kid=k1 sig=" + strings.Repeat("A", sigChars) + "=",
		"v1 ip=203.0.113.7 t=1 kid= sig= kid=k1 sig=",
		"v2 ip=203.0.113.7 t=1 kid=k1 sig=x",
		"",
	} {
		f.Add(seed)
	}
	origin := originHandler(f, 0, "k1", testKey1)
	f.Fuzz(func(t *testing.T, value string) {
		a, ok := parseAssertion(value)
		if ok {
			back := assertionPrefix + a.ip + " t=" + a.t + " kid=" + a.kid + " sig=" + a.sig
			if back != value {
				t.Fatalf("parsed %q, which writes back as %q", value, back)
			}
			if a.addr.String() != a.ip || a.addr.Zone() != "" || a.addr.Is4In6() {
				t.Fatalf("%q: address %v from %q is not canonical", value, a.addr, a.ip)
			}
			if string(appendUnix(nil, a.unix)) != a.t || !validKeyID(a.kid) || len(a.sig) != sigChars {
				t.Fatalf("%q: fields %+v out of the format", value, a)
			}
		}
		r := newRequest("GET", "http://shop.example/p?q=1", popPeer, "X-Edge-Assertion", value)
		res := origin.resolver.resolveRequest(r)
		if !ok && res.reason != reasonAssertionMalformed {
			t.Fatalf("%q does not parse but was judged %q", value, res.reason)
		}
		if res.reason == reasonNone {
			signer := *pop.signer
			signer.now = func() time.Time { return time.Unix(a.unix, 0) }
			if want := signer.sign(a.ip, r); want != value {
				t.Fatalf("accepted %q, which the PoP would write as %q", value, want)
			}
		}
	})
}
