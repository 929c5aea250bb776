package integration

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// hashPassword is the bcrypt hash basic_auth wants, from the Caddy under
// test, at bcrypt's least cost: the default (14) takes seconds a request
// under the race detector, past the client's timeout.
func hashPassword(t *testing.T, password string) string {
	t.Helper()
	out, err := exec.Command(caddyBinary, "hash-password", "--algorithm", "bcrypt", "--bcrypt-cost", "4", "--plaintext", password).Output()
	if err != nil {
		t.Fatalf("caddy hash-password: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestThrottleKeyedOnAuthenticatedUser: with `order throttle after
// basic_auth`, a zone keyed on {http.auth.user.id} limits each user on
// its own, two users behind one address included. Without the order line
// (throttle before basic_auth, its default place), the key is empty on
// every request: it falls back to the caller's address (on_empty_key
// client_ip), so the users share their address's budget rather than every
// caller sharing one, the fallbacks are counted, and the log says once
// which order line fixes it.
func TestThrottleKeyedOnAuthenticatedUser(t *testing.T) {
	origin := EchoOrigin(t)
	hash := hashPassword(t, "pw")
	site := func(global string) string {
		return global + `
http://{$HOST}:{$HTTP_PORT} {
	basic_auth {
		alice ` + hash + `
		bob ` + hash + `
	}
	throttle {
		zone per_user {
			key {http.auth.user.id}
			rate 2/1h
		}
	}
	reverse_proxy ` + origin + `
}`
	}
	status := func(c *Caddy, user string) int {
		req, _ := http.NewRequest(http.MethodGet, c.URL("/"), nil)
		req.SetBasicAuth(user, "pw")
		resp, _ := Do(t, c.Client(), req)
		return resp.StatusCode
	}

	t.Run("after basic_auth", func(t *testing.T) {
		c := StartCaddyWith(t, Options{Global: "order throttle after basic_auth"}, site(""))
		for i, want := range []int{200, 200, 429} {
			if s := status(c, "alice"); s != want {
				t.Fatalf("alice request %d: %d, want %d", i+1, s, want)
			}
		}
		for i, want := range []int{200, 200, 429} {
			if s := status(c, "bob"); s != want {
				t.Fatalf("bob (same address) request %d: %d, want %d: users are not limited apart", i+1, s, want)
			}
		}
		if s := status(c, "mallory"); s != 401 {
			t.Fatalf("unknown user: %d, want 401 from basic_auth", s)
		}
		if v, ok := metricValue(c.Metrics(), `caddy_throttle_empty_keys_total{action="client_ip",zone="per_user"}`); ok && v != "0" {
			t.Fatalf("empty keys counted after basic_auth: %s", v)
		}
		if strings.Contains(c.Logs(), "key expanded to nothing") {
			t.Fatalf("empty-key warning with throttle after basic_auth:\n%s", grepLines(c.Logs(), "expanded"))
		}
	})

	t.Run("before basic_auth", func(t *testing.T) {
		c := StartCaddy(t, site(""))
		for i, want := range []int{200, 200} {
			if s := status(c, "alice"); s != want {
				t.Fatalf("alice request %d: %d, want %d", i+1, s, want)
			}
		}
		if s := status(c, "bob"); s != 429 {
			t.Fatalf("bob on alice's address: %d, want 429 (the empty key falls back to the address)", s)
		}
		if s := status(c, "alice"); s != 429 {
			t.Fatalf("alice's third: %d", s)
		}
		if v := counterValue(t, c.Metrics(), `caddy_throttle_empty_keys_total{action="client_ip",zone="per_user"}`); v != 4 {
			t.Fatalf("empty keys counted %v, want 4", v)
		}
		warn := grepLines(c.Logs(), "key expanded to nothing")
		if strings.Count(warn, "\n")+1 != 1 || !strings.Contains(warn, "order throttle after basic_auth") {
			t.Fatalf("want one warning naming the order line, got:\n%s", warn)
		}
	})
}

// TestThrottleEmptyKeyPolicies: a zone keyed on an API key header, through
// a real Caddy: without the header, on_empty_key client_ip limits per
// address (two addresses do not share), deny refuses with the zone named
// in handle_errors, skip leaves the request to the other zone.
func TestThrottleEmptyKeyPolicies(t *testing.T) {
	c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {
	route /fallback {
		throttle {
			zone key_fallback {
				key {http.request.header.X-Api-Key}
				rate 1/1h
			}
		}
	}
	route /deny {
		throttle {
			zone key_deny {
				key {http.request.header.X-Api-Key}
				rate 100/1h
				on_empty_key deny
			}
		}
	}
	route /skip {
		throttle {
			zone key_skip {
				key {http.request.header.X-Api-Key}
				rate 1/1h
				on_empty_key skip
			}
			zone skip_ip {
				rate 3/1h
			}
		}
	}
	respond "ok"
	handle_errors {
		respond "refused by {http.vars.throttle_rejected}" {err.status_code}
	}
}`)
	a, b := c.ClientFrom(t, "127.0.0.11"), c.ClientFrom(t, "127.0.0.12")
	for name, tc := range map[string]struct {
		client *http.Client
		want   int
	}{"a": {a, 200}, "b": {b, 200}} {
		if resp, body := Get(t, tc.client, c.URL("/fallback")); resp.StatusCode != tc.want {
			t.Fatalf("fallback, caller %s without a key: %d %q: callers without a key share one budget", name, resp.StatusCode, body)
		}
	}
	if resp, _ := Get(t, a, c.URL("/fallback")); resp.StatusCode != 429 {
		t.Fatalf("fallback, caller a again: %d, want 429 (limited on its address)", resp.StatusCode)
	}
	if resp, body := Get(t, a, c.URL("/deny")); resp.StatusCode != 429 || body != "refused by key_deny" || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("deny without a key: %d %q Retry-After %q", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	if resp, _ := Get(t, a, c.URL("/deny"), "X-Api-Key", "k"); resp.StatusCode != 200 {
		t.Fatalf("deny with a key: %d", resp.StatusCode)
	}
	for i, want := range []int{200, 200, 200, 429} {
		resp, body := Get(t, b, c.URL("/skip"))
		if resp.StatusCode != want {
			t.Fatalf("skip request %d: %d %q, want %d (only the address zone decides)", i+1, resp.StatusCode, body, want)
		}
		if want == 429 && body != "refused by skip_ip" {
			t.Fatalf("skip: refused by %q, want skip_ip", body)
		}
	}
	m := c.Metrics()
	for series, want := range map[string]float64{
		`caddy_throttle_empty_keys_total{action="client_ip",zone="key_fallback"}`: 3,
		`caddy_throttle_empty_keys_total{action="deny",zone="key_deny"}`:          1,
		`caddy_throttle_empty_keys_total{action="skip",zone="key_skip"}`:          4,
	} {
		if v := counterValue(t, m, series); v != want {
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}
}

// TestThrottleRefusesImpossibleKeys: a reload with a misspelt request
// placeholder, a response placeholder or `rate 10/minute` is refused,
// naming what is wrong, and the running config keeps limiting.
func TestThrottleRefusesImpossibleKeys(t *testing.T) {
	config := func(zone string) string {
		return `http://{$HOST}:{$HTTP_PORT} {
	throttle {
		zone z {
			` + zone + `
		}
	}
	respond "ok"
}`
	}
	c := StartCaddy(t, config("rate 1/1h"))
	for zone, want := range map[string]string{
		"key {http.request.headr.X-Api-Key}\n\t\t\trate 10/s": `{http.request.headr.X-Api-Key} is not a placeholder Caddy knows`,
		"key {http.response.header.X-User}\n\t\t\trate 10/s":  `has a value only after throttle has decided`,
		"rate 10/minute": `unit \"minute\" is not a duration unit: use one of ns, us (or µs), ms, s, m, h, d`,
	} {
		if status, body := c.Load(config(zone)); status == 200 || !strings.Contains(body, want) {
			t.Errorf("reload with %q: %d %s; want a refusal containing %s", zone, status, body, want)
		}
	}
	for i, want := range []int{200, 429} {
		if resp, _ := Get(t, c.Client(), c.URL("/")); resp.StatusCode != want {
			t.Fatalf("running config, request %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
}
