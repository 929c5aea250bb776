package ratelimit

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-edgekit/edgekit/internal/adapttest"
)

// A bound is checked by one function, so the Caddyfile and JSON refuse the
// same value with the same message.
func TestCaddyfileAndJSONRefuseAlike(t *testing.T) {
	zone := func(opts string) string { return "zone z {\n rate 1/s\n " + opts + "\n}\n" }
	one := func(z Zone) []*Zone {
		if z.Rate == "" {
			z.Rate = "1/s"
		}
		z.Name = "z"
		return []*Zone{&z}
	}
	z := one(Zone{})
	var nine strings.Builder
	for i := range 9 {
		fmt.Fprintf(&nine, "zone z%d {\n rate 1/s\n}\n", i)
	}
	for _, tc := range []struct {
		caddyfile string
		json      Handler
	}{
		{zone("ipv4_prefix 33"), Handler{Zones: one(Zone{IPv4Prefix: 33})}},
		{zone("ipv6_prefix 129"), Handler{Zones: one(Zone{IPv6Prefix: 129})}},
		{zone("rate 0/s"), Handler{Zones: one(Zone{Rate: "0/s"})}},
		{zone("burst -1"), Handler{Zones: one(Zone{Burst: new(int64(-1))})}},
		{zone("burst 40000000"), Handler{Zones: one(Zone{Burst: new(int64(40_000_000))})}},
		{zone("key {oops"), Handler{Zones: one(Zone{Key: "{oops"})}},
		{zone("") + "mode dry", Handler{Zones: z, Mode: "dry"}},
		{zone("") + "status 200", Handler{Zones: z, Status: 200}},
		{zone("") + "store disk", Handler{Zones: z, Store: &Store{Type: "disk"}}},
		{zone("") + "store memory -1", Handler{Zones: z, Store: &Store{MaxKeys: -1}}},
		{zone("") + "store redis {\n address 127.0.0.1:1\n on_error maybe\n}", Handler{Zones: z, Store: &Store{Type: "redis", Redis: &RedisStore{Address: "127.0.0.1:1", OnError: "maybe"}}}},
		{zone("") + "store redis {\n address 127.0.0.1:1\n timeout -1s\n}", Handler{Zones: z, Store: &Store{Type: "redis", Redis: &RedisStore{Address: "127.0.0.1:1", Timeout: caddy.Duration(-time.Second)}}}},
		{zone("") + "store redis {\n address 127.0.0.1:1\n db -1\n}", Handler{Zones: z, Store: &Store{Type: "redis", Redis: &RedisStore{Address: "127.0.0.1:1", DB: -1}}}},
		{nine.String(), Handler{Zones: nineZones()}},
	} {
		ctx, cancel := newContext()
		h := tc.json
		jsonErr := h.Provision(ctx)
		_ = h.Cleanup()
		cancel()
		err := new(Handler).UnmarshalCaddyfile(caddyfile.NewTestDispenser("throttle {\n" + tc.caddyfile + "\n}"))
		adapttest.SameRefusal(t, tc.caddyfile, err, jsonErr)
	}
}

// Each enumeration reads back only the strings JSON always had.
func TestParseEnums(t *testing.T) {
	for _, tc := range []struct {
		parse     func(string) (string, error)
		good, bad []string
	}{
		{func(s string) (string, error) { m, err := parseMode(s); return string(m), err }, []string{"enforce", "observe"}, []string{"", "dry", "Enforce"}},
		{func(s string) (string, error) { m, err := parseStoreType(s); return string(m), err }, []string{"memory", "redis"}, []string{"", "disk", "Redis"}},
		{func(s string) (string, error) { m, err := parseOnError(s); return string(m), err }, []string{"allow", "deny"}, []string{"", "maybe", "deny "}},
	} {
		for _, s := range tc.good {
			if got, err := tc.parse(s); err != nil || got != s {
				t.Errorf("parse(%q) = %q, %v", s, got, err)
			}
		}
		for _, s := range tc.bad {
			if _, err := tc.parse(s); err == nil {
				t.Errorf("parse(%q) accepted", s)
			}
		}
	}
}
