package suggest

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestNearest(t *testing.T) {
	zone := []string{"key", "rate", "burst", "ipv4_prefix", "ipv6_prefix", "charge_on"}
	for _, tc := range []struct{ name, want string }{
		{"brust", "burst"},  // transposition: one edit
		{"BURST", "burst"},  // case
		{"bursts", "burst"}, // insertion
		{"rat", "rate"},     // deletion
		{"ipv4prefix", "ipv4_prefix"},
		{"ipv6_prefx", "ipv6_prefix"}, // nearest, not the first within reach
		{"charge", ""},                // three edits from charge_on: too far for 6 letters
		{"x", ""},
		{"", ""},
		{"colour", ""},
		{strings.Repeat("burst", 100), ""},
	} {
		if got := Nearest(tc.name, zone); got != tc.want {
			t.Errorf("Nearest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	// Ties go to the earlier candidate.
	if got := Nearest("ab", []string{"ax", "xb"}); got != "ax" {
		t.Errorf("tie: %q", got)
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"burst", "burst", 0},
		{"brust", "burst", 1}, {"kitten", "sitting", 3}, {"ca", "abc", 3}, // OSA, not full Damerau
	} {
		if got := distance(tc.a, tc.b, 10); got != tc.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := distance(tc.b, tc.a, 10); got != tc.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
	// Past the limit, the answer is only "at least the limit".
	if got := distance("aaaaaaaa", "bbbbbbbb", 2); got < 2 {
		t.Errorf("limited distance %d < 2", got)
	}
}

func TestMessage(t *testing.T) {
	valid := []string{"zone", "store", "mode", "status", "headers"}
	for _, tc := range []struct {
		module, where, name string
		want                []string
	}{
		{"throttle", `zone "api"`, "brust", []string{`throttle: zone "api": unknown subdirective "brust": did you mean burst? (valid: key, rate, burst`}},
		{"throttle", "", "events", []string{`throttle: unknown subdirective "events": that is caddy-ratelimit's syntax; in edgekit: rate <n>/<duration>`}},
		{"throttle", "", "limit_req", []string{"that is nginx syntax", "zone <name>"}},
		{"client_ip", "", "set_real_ip_from", []string{"nginx realip syntax", "trusted_proxies <cidr"}},
		{"client_ip", "", "real_ip_header", []string{"header <name>"}},
		{"substitute", "", "re", []string{"replace-response syntax", "regex <pattern> <replacement>"}},
		{"substitute", "", "subs_filter", []string{"nginx subs_filter syntax", "replace <find> <replacement>"}},
		{"throttle", "", "colour", []string{`throttle: unknown subdirective "colour" (valid: zone, store, mode, status, headers)`}},
		// A foreign name of another module is no hint here.
		{"br", "", "events", []string{`br: unknown subdirective "events" (valid:`}},
	} {
		v := valid
		if tc.where != "" {
			v = []string{"key", "rate", "burst"}
		}
		got := Message(tc.module, tc.where, tc.name, v)
		for _, want := range tc.want {
			if !strings.Contains(got, want) {
				t.Errorf("Message(%q, %q, %q) = %q, lacks %q", tc.module, tc.where, tc.name, got, want)
			}
		}
	}
}

func TestUnknownPointsAtTheLine(t *testing.T) {
	d := caddyfile.NewTestDispenser("throttle {\n\tbrust 5\n}")
	d.Next()
	d.NextBlock(0)
	err := Unknown(d, d.Val(), "throttle", "", "burst")
	if err == nil || !strings.Contains(err.Error(), "Testfile:2") || !strings.Contains(err.Error(), "did you mean burst?") {
		t.Fatalf("Unknown: %v", err)
	}
}
