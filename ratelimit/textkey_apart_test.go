package ratelimit

import (
	"testing"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// textKeyLikeAddress: a text key (a header the caller writes) that looks
// like an address must be a budget of its own, never the budget of that
// address, which on_empty_key client_ip keys a caller without the header
// on; and two such texts never share a budget by an address prefix.
func textKeyLikeAddress(t *testing.T, h *Handler) {
	t.Helper()
	key := func(v string) map[string]string { return map[string]string{"X-Api-Key": v} }
	for i := range 6 {
		res := serve(t, h, "192.0.2.120", key("192.0.2.103"))
		if want := i < 5; res.passed != want {
			t.Fatalf("attacker request %d with the key 192.0.2.103: passed %v, want %v", i+1, res.passed, want)
		}
	}
	if res := serve(t, h, "192.0.2.103", nil); !res.passed {
		t.Fatalf("victim 192.0.2.103 without a key: %d, want a pass (the attacker's text key used up its address's budget)", res.status)
	}
	for range 5 {
		serve(t, h, "192.0.2.120", key("::ffff:192.0.2.104"))
	}
	if res := serve(t, h, "192.0.2.104", nil); !res.passed {
		t.Fatalf("victim 192.0.2.104 without a key: %d, want a pass (::ffff:192.0.2.104 was its budget)", res.status)
	}
	for range 5 {
		serve(t, h, "192.0.2.120", key("2001:db8::1"))
	}
	if res := serve(t, h, "192.0.2.121", key("2001:db8::2")); !res.passed {
		t.Fatalf("key 2001:db8::2 after 2001:db8::1 used its budget: %d, want a pass (two keys shared a /64)", res.status)
	}
}

// TestTextKeyLikeAddressIsNotThatAddress: on the memory store.
func TestTextKeyLikeAddressIsNotThatAddress(t *testing.T) {
	h := provision(t, &Handler{Zones: []*Zone{{Name: "text-apart", Key: "{http.request.header.X-Api-Key}", Rate: "5/1m"}}}, nil)
	textKeyLikeAddress(t, h)
}

// TestRedisTextKeyLikeAddressIsNotThatAddress: on Redis, where the text
// 192.0.2.103 was named 192.0.2.103/32, the fallback's name.
func TestRedisTextKeyLikeAddressIsNotThatAddress(t *testing.T) {
	rs := testredis.Start(t)
	h := redisHandler(t, rs, "deny", &Zone{Name: "r-text-apart", Key: "{http.request.header.X-Api-Key}", Rate: "5/1m"})
	textKeyLikeAddress(t, h)
}

// TestAddressPlaceholderKeysAreAddresses: a key that is one address
// placeholder ({client_ip}, {remote_host} and their long names) is still
// cut to the zone's prefixes; any other template is text as it is.
func TestAddressPlaceholderKeysAreAddresses(t *testing.T) {
	for _, tc := range []struct {
		template string
		addr     bool
	}{
		{"{http.vars.client_ip}", true},
		{"{client_ip}", true},
		{"{http.request.remote.host}", true},
		{"{http.request.header.X-Api-Key}", false},
		{"{http.request.header.X-Real-IP}", false},
		{"ip:{http.vars.client_ip}", false},
		{"{http.vars.client_ip}{http.request.header.X}", false},
		{"10.0.0.1", false},
	} {
		k, err := parseKeyTemplate(tc.template)
		if err != nil {
			t.Fatalf("%s: %v", tc.template, err)
		}
		k.v4bits, k.v6bits = 32, 64
		if rk := k.fromString("2001:db8::1"); rk.isAddr != tc.addr {
			t.Errorf("%s: 2001:db8::1 taken as an address %v, want %v", tc.template, rk.isAddr, tc.addr)
		}
	}
}

// TestAddressAndTextHashApart: the memory store's hash of a text key is
// never the hash of an address key by construction (the same 17 bytes).
func TestAddressAndTextHashApart(t *testing.T) {
	k := keyTemplate{v4bits: 32, v6bits: 64, addrKey: true}
	a := k.fromString("192.0.2.1")
	b := a.addr.Addr().As16()
	raw := string(append(b[:], byte(a.addr.Bits())))
	if (requestKey{text: raw}).hash() == a.hash() {
		t.Fatal("a text key of the address's 17 bytes has the address's hash")
	}
}
