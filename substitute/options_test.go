package substitute

import (
	"context"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-edgekit/edgekit/internal/adapttest"
)

// A bound is checked by one function, so the Caddyfile and JSON refuse the
// same value with the same message.
func TestCaddyfileAndJSONRefuseAlike(t *testing.T) {
	a := []Rule{{Find: "a"}}
	long := strings.Repeat("a", 100)
	for _, tc := range []struct {
		caddyfile string
		json      Handler
	}{
		{"", Handler{}},
		{"replace a b\npriority shortest", Handler{Rules: a, Priority: "shortest"}},
		{"replace a b\nmax_match 10", Handler{Rules: a, MaxMatch: 10}},
		{"replace a b\nmax_match 32MiB", Handler{Rules: a, MaxMatch: 32 << 20}},
		{"replace " + long + " b\nmax_match 64", Handler{Rules: []Rule{{Find: long}}, MaxMatch: 64}},
		{"replace a b\nmemo 20000000", Handler{Rules: a, Memo: 20_000_000}},
		{"replace a b\ntypes text/html;charset=utf-8", Handler{Rules: a, Types: []string{"text/html;charset=utf-8"}}},
		{"replace a b\ntypes html", Handler{Rules: a, Types: []string{"html"}}},
		{"replace a b\nstatus 700", Handler{Rules: a, Status: []int{700}}},
	} {
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		h := tc.json
		jsonErr := provisionValidate(ctx, &h)
		cancel()
		err := new(Handler).UnmarshalCaddyfile(caddyfile.NewTestDispenser("substitute {\n" + tc.caddyfile + "\n}"))
		adapttest.SameRefusal(t, tc.caddyfile, err, jsonErr)
	}
}

// A bare digit in the Caddyfile is not a class: classes are written nxx.
func TestCaddyfileStatus(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want int // 0: refused
	}{{"200", 200}, {"2xx", 2}, {"5XX", 5}, {"2", 0}, {"99", 0}, {"600", 0}, {"6xx", 0}, {"abc", 0}} {
		h := new(Handler)
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("substitute {\nreplace a b\nstatus " + tc.arg + "\n}"))
		switch {
		case tc.want == 0 && err == nil:
			t.Errorf("status %s: accepted as %v", tc.arg, h.Status)
		case tc.want != 0 && (err != nil || len(h.Status) != 1 || h.Status[0] != tc.want):
			t.Errorf("status %s: %v, %v; want [%d]", tc.arg, h.Status, err, tc.want)
		}
	}
}

// The enumeration reads back only the strings JSON always had.
func TestParsePriority(t *testing.T) {
	for _, s := range []string{"longest", "first"} {
		if p, err := parsePriority(s); err != nil || string(p) != s {
			t.Errorf("parsePriority(%q) = %q, %v", s, p, err)
		}
	}
	for _, s := range []string{"", "shortest", "First"} {
		if _, err := parsePriority(s); err == nil {
			t.Errorf("parsePriority(%q) accepted", s)
		}
	}
}
