package clientip

import (
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-edgekit/edgekit/internal/adapttest"
)

// A bound is checked by one function, so the Caddyfile and JSON refuse the
// same value with the same message.
func TestCaddyfileAndJSONRefuseAlike(t *testing.T) {
	for _, tc := range []struct{ caddyfile, json string }{
		{"hops 0", `{"trusted_proxies":["10.0.0.0/8"],"hops":0}`},
		{"hops 17", `{"trusted_proxies":["10.0.0.0/8"],"hops":17}`},
		{"untrusted deny", `{"trusted_proxies":["10.0.0.0/8"],"untrusted":"deny"}`},
		{"untrusted reject 302", `{"trusted_proxies":["10.0.0.0/8"],"untrusted":"reject","reject_status":302}`},
		{"trusted_proxies 10.0.0.0/33", `{"trusted_proxies":["10.0.0.0/33"]}`},
		{"header Bad:Name", `{"trusted_proxies":["10.0.0.0/8"],"header":"Bad:Name"}`},
		{"verify {\n\t\tkey k1 " + testKey1 + "\n\t\tmax_age 0\n\t}", `{"trusted_proxies":["10.0.0.0/8"],"verify":{"keys":[{"id":"k1","secret":"` + testKey1 + `"}],"max_age":0}}`},
		{"verify {\n\t\tkey k1 " + testKey1 + "\n\t\tmax_age 6m\n\t}", `{"trusted_proxies":["10.0.0.0/8"],"verify":{"keys":[{"id":"k1","secret":"` + testKey1 + `"}],"max_age":"6m"}}`},
		{"verify {\n\t\tkey k1 " + testKey1 + "\n\t\tkey k1 " + testKey2 + "\n\t}", `{"trusted_proxies":["10.0.0.0/8"],"verify":{"keys":[{"id":"k1","secret":"` + testKey1 + `"},{"id":"k1","secret":"` + testKey2 + `"}]}}`},
		{"sign {\n\t\tkey k/1 " + testKey1 + "\n\t}", `{"trusted_proxies":["10.0.0.0/8"],"sign":{"key":{"id":"k/1","secret":"` + testKey1 + `"}}}`},
	} {
		_, jsonErr := tryProvision(tc.json)
		err := new(Handler).UnmarshalCaddyfile(caddyfile.NewTestDispenser("client_ip {\n\ttrusted_proxies 10.0.0.0/8\n\t" + tc.caddyfile + "\n}"))
		adapttest.SameRefusal(t, tc.caddyfile, err, jsonErr)
	}
}

// The enumeration reads back only the strings JSON always had.
func TestParseUntrusted(t *testing.T) {
	for _, s := range []string{"allow", "observe", "reject"} {
		if u, err := parseUntrusted(s); err != nil || string(u) != s {
			t.Errorf("parseUntrusted(%q) = %q, %v", s, u, err)
		}
	}
	for _, s := range []string{"", "deny", "Reject", "reject "} {
		if _, err := parseUntrusted(s); err == nil {
			t.Errorf("parseUntrusted(%q) accepted", s)
		}
	}
}
