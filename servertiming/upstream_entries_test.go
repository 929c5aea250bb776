package servertiming

import (
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// TestDropOwnNames: the upstream's entries named as the PoP's go, in any
// case, wherever they are in a value; the others stay as written, quoted
// commas and escapes included; a value with none is the same string.
func TestDropOwnNames(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"app;dur=1"}, []string{"app;dur=1"}},
		{[]string{`edge;dur=0, origin;dur=0, client;desc="h3 tls=0rtt"`}, []string{}},
		{[]string{`edge;dur=0, app;desc="a, edge;dur=1", Rtt;dur=0`, "db;dur=2"}, []string{`app;desc="a, edge;dur=1"`, "db;dur=2"}},
		{[]string{`x;desc="q\", total;dur=0", TOTAL ;dur=0,origin-tls`}, []string{`x;desc="q\", total;dur=0"`}},
		{[]string{"a, substitute;dur=1, b", "throttle"}, []string{"a, b"}},
		{[]string{`u;desc="unterminated, edge;dur=1`}, []string{`u;desc="unterminated, edge;dur=1`}},
		{[]string{"origin-conn;desc=new", "edge-like;dur=1, origin-dial;dur=3"}, []string{"edge-like;dur=1"}},
	} {
		if got := dropOwnNames(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("dropOwnNames(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// entries splits a field value on the commas outside quoted-strings.
func entries(v string) []string {
	var out []string
	for start := 0; start <= len(v); {
		end := entryEnd(v, start)
		if e := strings.TrimSpace(v[start:end]); e != "" {
			out = append(out, e)
		}
		start = end + 1
	}
	return out
}

func entryName(e string) string {
	if i := strings.IndexByte(e, ';'); i >= 0 {
		e = e[:i]
	}
	return strings.TrimSpace(e)
}

// FuzzDropOwnNames: whatever an upstream writes (hostile quoting, huge
// values), no entry named as the PoP's is left, the other entries are kept
// in order as written, nothing changes when there was none, the result is
// a fixed point, and a valid field value stays valid.
func FuzzDropOwnNames(f *testing.F) {
	for _, s := range []string{"app;dur=1", `edge;dur=0, app;desc="a, edge;dur=1", Rtt;dur=0`, `"\", edge`,
		`x;desc="\\", total`, ",,,", "", "EDGE", strings.Repeat("a;desc=\"", 50) + "edge"} {
		f.Add(s, "db;dur=2")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		in := []string{a, b}
		out := dropOwnNames(in)
		var want, got []string
		own := false
		for _, v := range in {
			for _, e := range entries(v) {
				if ownName(entryName(e)) {
					own = true
				} else {
					want = append(want, e)
				}
			}
		}
		for _, v := range out {
			if !httpguts.ValidHeaderFieldValue(v) && httpguts.ValidHeaderFieldValue(a) && httpguts.ValidHeaderFieldValue(b) {
				t.Fatalf("%q from valid %q", v, in)
			}
			got = append(got, entries(v)...)
		}
		if !own && !slices.Equal(out, in) {
			t.Fatalf("no own name in %q, yet %q", in, out)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%q: entries %q, want %q", in, got, want)
		}
		if again := dropOwnNames(out); !slices.Equal(again, out) {
			t.Fatalf("not a fixed point: %q then %q", out, again)
		}
	})
}
