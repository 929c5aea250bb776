package servertiming

import (
	"strings"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/edgebench"
)

func TestAppendDurMilliseconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "edge;dur=0.000"},
		{-time.Second, "edge;dur=0.000"},
		{999 * time.Nanosecond, "edge;dur=0.000"},
		{time.Microsecond, "edge;dur=0.001"},
		{1500 * time.Microsecond, "edge;dur=1.500"},
		{12*time.Millisecond + 34*time.Microsecond, "edge;dur=12.034"},
		{1 << 62, "edge;dur=4611686018427.387"},
	} {
		if got := string(appendDur(nil, nameEdge, tc.d)); got != tc.want {
			t.Errorf("appendDur(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestEntriesParse: what the handler writes is what edgebench reads back,
// names, values (to the microsecond) and descs.
func TestEntriesParse(t *testing.T) {
	b := appendDur(nil, nameEdge, 1234567*time.Nanosecond)
	b = appendDur(b, nameOrigin, 45*time.Millisecond)
	b = appendDesc(b, nameOriginConn, "new")
	b = appendDesc(b, nameClient, clientDescs[2][tls0RTT])
	got := edgebench.ParseServerTiming(string(b))
	want := []edgebench.ServerTimingMetric{
		{Name: "edge", Dur: 1234 * time.Microsecond, HasDur: true},
		{Name: "origin", Dur: 45 * time.Millisecond, HasDur: true},
		{Name: "origin-conn", Desc: "new"},
		{Name: "client", Desc: "h3 tls=0rtt"},
	}
	if len(got) != len(want) {
		t.Fatalf("%q parsed as %+v", b, got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%q entry %d: %+v, want %+v", b, i, got[i], want[i])
		}
	}
}

// TestClientDescsQuoted: every client desc is one quoted-string with no
// escapes, and parses back as "<proto> tls=<mode>".
func TestClientDescsQuoted(t *testing.T) {
	for p, row := range clientDescs[:3] {
		for m, d := range row {
			inner := strings.Trim(d, `"`)
			if d != `"`+inner+`"` || strings.ContainsAny(inner, "\"\\,;") {
				t.Errorf("desc %q is not a plain quoted-string", d)
			}
			e := edgebench.ParseServerTiming(string(appendDesc(nil, nameClient, d)))
			if len(e) != 1 || e[0].Desc != inner {
				t.Errorf("desc %q parsed as %+v", d, e)
			}
			proto, mode, _ := strings.Cut(inner, " tls=")
			if proto != []string{"h1", "h2", "h3"}[p] || mode != []string{"none", "new", "resumed", "0rtt"}[m] {
				t.Errorf("desc %q at [%d][%d]", d, p, m)
			}
		}
	}
}

// TestMaxHeaderLen: every entry at once, each at its largest, fits the
// buffer the handler builds them in.
func TestMaxHeaderLen(t *testing.T) {
	big := time.Duration(1<<63 - 1)
	b := appendDur(nil, nameEdge, big)
	for _, n := range []string{nameOrigin, nameOriginDial, nameOriginTLS, nameRTT, nameThrottle} {
		b = appendDur(b, n, big)
	}
	b = appendDesc(b, nameOriginConn, "reused")
	b = appendDesc(b, nameClient, clientDescs[2][tlsResumed])
	if len(b) > maxHeaderLen {
		t.Fatalf("%d bytes, more than maxHeaderLen %d: %s", len(b), maxHeaderLen, b)
	}
}

// TestCheckTimingAllowOriginBrowserMatch: values no browser's serialized
// origin can equal are refused, each with why and the value to write.
func TestCheckTimingAllowOriginBrowserMatch(t *testing.T) {
	for _, tc := range []struct{ in, why string }{
		{"https://*.example.com", "no wildcards"},
		{"https://a.example:443", "write https://a.example, without :443"},
		{"http://a.example:80", "write http://a.example, without :80"},
		{"https://[::1]:443", "write https://[::1], without :443"},
		{"https://.example.com", "empty label"},
		{"https://a..example.com", "empty label"},
		{"https://a.example.", "empty label"},
		{"https://-bad.example", "hyphen"},
		{"https://bad-.example", "hyphen"},
		{"https://" + strings.Repeat("a", 64) + ".example", "longer than 63"},
		{"https://" + strings.Repeat("a.", 127) + "aa", "longer than 253"},
		{"https://127.1", "dotted decimal"},
		{"https://0x7f.0.0.1", "dotted decimal"},
		{"https://a.0x10", "dotted decimal"},
		{"https://127.000.0.1", "dotted decimal"},
		{"https://[::ffff:1.2.3.4]", "write https://1.2.3.4"},
		{"https://[0:0::1]", "write https://[::1]"},
		{"https://[1.2.3.4]", "not an origin"},
		{"https://a_b!.example", "other than"},
	} {
		err := checkTimingAllowOrigin([]string{tc.in})
		if err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%q: %v; want an error saying %q", tc.in, err, tc.why)
		}
	}
	if err := checkTimingAllowOrigin([]string{"https://a.example", "https://b.example", "https://a.example"}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a duplicate: %v", err)
	}
	for _, ok := range []string{"https://127.0.0.1:8443", "https://[2001:db8::1]", "http://a-b.example", "https://xn--bcher-kva.example", "https://_srv.example", "https://" + strings.Repeat("a", 63) + ".example", "http://localhost"} {
		if err := checkTimingAllowOrigin([]string{ok}); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
}

func TestCheckTimingAllowOrigin(t *testing.T) {
	for _, tc := range []struct {
		in []string
		ok bool
	}{
		{[]string{"*"}, true},
		{[]string{"https://app.example.com"}, true},
		{[]string{"http://localhost:8080", "https://[::1]:8443"}, true},
		{[]string{"*", "https://a.example"}, false},
		{[]string{"https://app.example.com/"}, false},
		{[]string{"https://App.example.com"}, false},
		{[]string{"https://a.example, https://b.example"}, false},
		{[]string{"https://a.example;x"}, false},
		{[]string{"https://a.example\r\nSet-Cookie: x=1"}, false},
		{[]string{`"https://a.example"`}, false},
		{[]string{"https://user@a.example"}, false},
		{[]string{"ftp://a.example"}, false},
		{[]string{"https://a.example:0"}, false},
		{[]string{"https://a.example:99999"}, false},
		{[]string{"https://a.example:"}, false},
		{[]string{"https://"}, false},
		{[]string{"null"}, false},
		{[]string{""}, false},
	} {
		err := checkTimingAllowOrigin(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("checkTimingAllowOrigin(%q): %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}
