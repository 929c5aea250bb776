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

func TestCheckTimingAllowOrigin(t *testing.T) {
	for _, tc := range []struct {
		in []string
		ok bool
	}{
		{[]string{"*"}, true},
		{[]string{"https://app.example.com"}, true},
		{[]string{"http://localhost:8080", "https://[::1]:443"}, true},
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
