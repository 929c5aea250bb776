package servertiming

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/caddy-edgekit/edgekit/internal/edgebench"
)

// FuzzTimingAllowOrigin: a timing_allow_origin value the check accepts
// becomes header text that can add no field, no other origin and no
// header: a valid field value of one list member, without CR, LF, comma,
// semicolon, quote, backslash or space; and it is "*" or scheme://host.
func FuzzTimingAllowOrigin(f *testing.F) {
	for _, s := range []string{"*", "https://app.example.com", "http://localhost:3000", "https://[::1]:8443",
		"https://a.example, https://b.example", "https://a.example\r\nSet-Cookie: x", "https://a.example/", "null", `"*"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkTimingAllowOrigin([]string{s}) != nil {
			return
		}
		if !httpguts.ValidHeaderFieldValue(s) || strings.ContainsAny(s, "\r\n\x00,;\"\\ \t") {
			t.Fatalf("accepted %q, which is not a single safe field value", s)
		}
		if s != "*" && !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
			t.Fatalf("accepted %q, neither * nor an http(s) origin", s)
		}
	})
}

// FuzzEntries: whatever the durations (an upstream or a clock can give any
// int64, negative ones too), the serialised entries are one valid field
// value that edgebench's parser reads back as exactly the names written,
// each duration to the microsecond (negative ones as 0), and the descs.
func FuzzEntries(f *testing.F) {
	f.Add(int64(0), int64(1), int64(-1), uint8(0), uint8(0), true)
	f.Add(int64(1<<63-1), int64(-1<<63), int64(999), uint8(2), uint8(3), false)
	f.Add(int64(12_345_678), int64(1_000), int64(1_000_000_000), uint8(1), uint8(2), true)
	f.Fuzz(func(t *testing.T, edge, origin, rtt int64, proto, mode uint8, reused bool) {
		desc := clientDescs[proto%3][mode%4]
		conn := map[bool]string{true: "reused", false: "new"}[reused]
		var buf [maxHeaderLen]byte
		b := appendDur(buf[:0], nameEdge, time.Duration(edge))
		b = appendDur(b, nameOrigin, time.Duration(origin))
		b = appendDesc(b, nameOriginConn, conn)
		b = appendDesc(b, nameClient, desc)
		b = appendDur(b, nameRTT, time.Duration(rtt))
		v := string(b)
		if !httpguts.ValidHeaderFieldValue(v) || strings.ContainsAny(v, "\r\n\x00") {
			t.Fatalf("%q is not a valid field value", v)
		}
		got := edgebench.ParseServerTiming(v)
		us := func(d int64) time.Duration { return time.Duration(max(d, 0)/1000) * time.Microsecond }
		want := []edgebench.ServerTimingMetric{
			{Name: nameEdge, Dur: us(edge), HasDur: true},
			{Name: nameOrigin, Dur: us(origin), HasDur: true},
			{Name: nameOriginConn, Desc: conn},
			{Name: nameClient, Desc: desc[1 : len(desc)-1]},
			{Name: nameRTT, Dur: us(rtt), HasDur: true},
		}
		if len(got) != len(want) {
			t.Fatalf("%q parsed as %d entries: %+v", v, len(got), got)
		}
		for i := range want {
			w := want[i]
			// edgebench bounds a dur at about 11.6 days: past it, no dur.
			if w.HasDur && w.Dur > 1e9*time.Millisecond {
				w.Dur, w.HasDur = 0, false
			}
			if got[i] != w {
				t.Fatalf("%q entry %d: %+v, want %+v", v, i, got[i], w)
			}
		}
	})
}
