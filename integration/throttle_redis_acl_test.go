package integration

import (
	"strings"
	"testing"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

// TestThrottleRedisACL: an ACL user with the documented least privileges
// limits; one lacking +time is reported at first use as NOPERM, at error
// level, with the privileges to grant, and counted, while on_error decides.
func TestThrottleRedisACL(t *testing.T) {
	rs := testredis.Start(t)
	base := []string{"ACL", "SETUSER", "", "on", ">pw", "resetkeys", "~edge:*", "resetchannels", "-@all", "+evalsha", "+eval", "+get", "+set"}
	for user, extra := range map[string]string{"edge": "+time", "edge_notime": "+ping"} {
		cmd := append([]string{}, base...)
		cmd[2] = user
		if r := testredis.Command(t, rs.Addr(), append(cmd, extra)...); r != "OK" {
			t.Fatalf("ACL SETUSER %s: %q", user, r)
		}
	}
	route := func(path, user string) string {
		return `
	handle ` + path + ` {
		throttle {
			zone acl_` + user + ` {
				rate 1/1h
			}
			store redis {
				address ` + rs.Addr() + `
				username ` + user + `
				password pw
				key_prefix edge:
				timeout 2s
				on_error deny
			}
		}
		respond "ok"
	}`
	}
	c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {`+route("/ok", "edge")+route("/noperm", "edge_notime")+`
}`)
	client := c.Client()
	for i, want := range []int{200, 429} {
		if resp, body := Get(t, client, c.URL("/ok")); resp.StatusCode != want {
			t.Fatalf("least privileges, request %d: %d %q, want %d\n%s", i, resp.StatusCode, body, want, grepLines(c.Logs(), "redis"))
		}
	}
	if resp, _ := Get(t, client, c.URL("/noperm")); resp.StatusCode != 503 {
		t.Fatalf("user without +time: %d, want 503 (on_error deny)", resp.StatusCode)
	}
	failed := grepLines(c.Logs(), "redis connect failed")
	if !strings.Contains(failed, "NOPERM") || !strings.Contains(failed, "+time") || !strings.Contains(strings.ToLower(failed), "error") {
		t.Fatalf("NOPERM not reported at error level with the privileges to grant:\n%s", failed)
	}
	if m := c.Metrics(); strings.Contains(m, "caddy_throttle_store_connect_errors_total 0\n") || !strings.Contains(m, "caddy_throttle_store_connect_errors_total ") {
		t.Fatalf("NOPERM not counted:\n%s", grepLines(m, "caddy_throttle_store"))
	}
}
