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
		{[]string{"origin-conn;desc=new", "edge-like;dur=1, origin-dial;dur=3"}, []string{"edge-like;dur=1"}},
		{[]string{"a ; dur = 1 ,b"}, []string{"a ; dur = 1, b"}},
	} {
		if got := dropOwnNames(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("dropOwnNames(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestDropOwnNamesMalformed: an entry that does not parse by the
// Server-Timing grammar goes whole, up to the next comma outside a
// quoted-string opened where a value starts: a stray quote in a token
// (which a browser takes as the token's end, skipping to the next comma)
// cannot hide a PoP-named entry from the filter, an unterminated quote
// drops the rest of its field value, and empty members go.
func TestDropOwnNamesMalformed(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`app;desc=x"y, edge;dur=0`, ""},
		{`app;desc="a"b"c, edge;dur=0`, ""},
		{`app;desc=x\"y, edge;dur=0`, ""},
		{`app;x=1"2, total;dur=0`, ""},
		{`app;x=1"2, total;dur=0, db;dur=1`, "db;dur=1"},
		{`app;desc="unterminated, db;dur=1`, ""},
		{`db;dur=1, app;desc="unterminated, x`, "db;dur=1"},
		{`"edge";dur=0, db`, "db"},
		{`edge=1;dur=0, db`, "db"},
		{`,, ,edge;dur=0,,db2`, "db2"},
		{`bad;desc=x "y, z", db`, "db"},
		{`bad x;desc="a, b", db`, "db"},
		{`a;, b;c=, d;=1, e;f="ok", g`, `e;f="ok", g`},
		{"a;desc=\"\x01\", db", ""},
	} {
		got := strings.Join(dropOwnNames([]string{tc.in}), "|")
		if got != tc.want {
			t.Errorf("dropOwnNames(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// wellFormed returns the entries of v that parse exactly, in order, as
// written (trimmed), whatever their names.
func wellFormed(v string) []string {
	var out []string
	for i := 0; i < len(v); {
		i = skipOWS(v, i)
		if i == len(v) {
			break
		}
		if v[i] == ',' {
			i++
			continue
		}
		e, ok, rest := parseEntry(v, i)
		switch {
		case ok:
			out = append(out, v[i:e])
			i = e
		case rest:
			i = len(v)
		default:
			i = skipMalformed(v, e)
		}
	}
	return out
}

// FuzzDropOwnNames: whatever an upstream writes (hostile quoting, huge
// values), every output entry parses exactly and alone, none is named as
// the PoP's, the output is a sub-list (in order) of the input's
// well-formed entries, written ", "-joined, a valid field value stays
// valid, a value already so is returned unchanged, and the result is a
// fixed point.
func FuzzDropOwnNames(f *testing.F) {
	for _, s := range []string{"app;dur=1", `edge;dur=0, app;desc="a, edge;dur=1", Rtt;dur=0`, `"\", edge`,
		`x;desc="\\", total`, ",,,", "", "EDGE", strings.Repeat("a;desc=\"", 50) + "edge",
		`app;desc=x"y, edge;dur=0`, `app;desc="a"b"c, edge;dur=0`, `app;x=1"2, total;dur=0`, `"edge";dur=0`, `edge=1;dur=0`} {
		f.Add(s, "db;dur=2")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		in := []string{a, b}
		out := dropOwnNames(in)
		var input []string
		for _, v := range in {
			input = append(input, wellFormed(v)...)
		}
		var got []string
		for _, v := range out {
			if v == "" {
				t.Fatalf("%q: an empty field value in %q", in, out)
			}
			if !httpguts.ValidHeaderFieldValue(v) && httpguts.ValidHeaderFieldValue(a) && httpguts.ValidHeaderFieldValue(b) {
				t.Fatalf("%q from valid %q", v, in)
			}
			es := wellFormed(v)
			if strings.Join(es, ", ") != v {
				t.Fatalf("%q: output %q is not its well-formed entries joined: %q", in, v, es)
			}
			for _, e := range es {
				if end, ok, _ := parseEntry(e, 0); !ok || end != len(e) {
					t.Fatalf("%q: output entry %q does not parse alone", in, e)
				}
				if ownName(e[:tokenEnd(e, 0)]) {
					t.Fatalf("%q: output entry %q has a PoP name", in, e)
				}
			}
			got = append(got, es...)
		}
		j := 0
		for _, e := range got {
			for j < len(input) && input[j] != e {
				j++
			}
			if j == len(input) {
				t.Fatalf("%q: output entries %q not a sub-list of the well-formed %q", in, got, input)
			}
			j++
		}
		for _, v := range in {
			if es := wellFormed(v); v != "" && strings.Join(es, ", ") == v && !slices.ContainsFunc(es, func(e string) bool { return ownName(e[:tokenEnd(e, 0)]) }) {
				if nv, changed := dropOwnNamesValue(v); changed || nv != v {
					t.Fatalf("%q: already clean, yet %q", v, nv)
				}
			}
		}
		if again := dropOwnNames(out); !slices.Equal(again, out) {
			t.Fatalf("not a fixed point: %q then %q", out, again)
		}
	})
}
