package integration

import (
	"net/http"
	"testing"
)

// TestThrottleTextKeyNotAnAddressBudget: through a real Caddy, a caller
// sending an API key that reads as another caller's address uses up only
// that text's budget: the caller at that address, sending no key (so
// on_empty_key client_ip keys it on its address), still passes; the same
// for an IPv4-mapped form, and two IPv6-looking keys in one /64 are two
// budgets. Before, the text was parsed as an address and cut to its
// prefix, so the victim's first request got 429.
func TestThrottleTextKeyNotAnAddressBudget(t *testing.T) {
	c := StartCaddy(t, `
http://{$HOST}:{$HTTP_PORT} {
	throttle {
		zone per_key {
			key {http.request.header.X-Api-Key}
			rate 5/1m
		}
	}
	respond "ok"
}`)
	attacker := c.ClientFrom(t, "127.0.0.150")
	status := func(cl *http.Client, key string) int {
		var resp *http.Response
		if key == "" {
			resp, _ = Get(t, cl, c.URL("/"))
		} else {
			resp, _ = Get(t, cl, c.URL("/"), "X-Api-Key", key)
		}
		return resp.StatusCode
	}
	for i, want := range []int{200, 200, 200, 200, 200, 429} {
		if s := status(attacker, "127.0.0.151"); s != want {
			t.Fatalf("attacker request %d with X-Api-Key 127.0.0.151: %d, want %d", i+1, s, want)
		}
	}
	if s := status(c.ClientFrom(t, "127.0.0.151"), ""); s != 200 {
		t.Fatalf("127.0.0.151 without a key: %d, want 200 (its address's budget was used by the text key)", s)
	}
	for range 5 {
		status(attacker, "::ffff:127.0.0.152")
	}
	if s := status(c.ClientFrom(t, "127.0.0.152"), ""); s != 200 {
		t.Fatalf("127.0.0.152 without a key: %d, want 200 (::ffff:127.0.0.152 used its budget)", s)
	}
	for range 5 {
		status(attacker, "2001:db8::1")
	}
	if s := status(attacker, "2001:db8::2"); s != 200 {
		t.Fatalf("X-Api-Key 2001:db8::2 after 2001:db8::1 used its budget: %d, want 200 (two keys shared a /64)", s)
	}
}
