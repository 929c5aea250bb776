package ratelimit_test

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-edgekit/edgekit/ratelimit"
)

// TestDirectiveAlone checks that this package alone, as in `xcaddy build
// --with github.com/caddy-edgekit/edgekit/ratelimit`, gives the throttle
// directive and its default order (before basic_auth): no `order` line, and
// throttle lands after header and before respond whatever the file's order.
func TestDirectiveAlone(t *testing.T) {
	const caddyfileText = `:8080 {
	respond "ok"
	throttle {
		zone api {
			rate 10/s
		}
	}
	header X-Test 1
}
`
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfileText), nil)
	if err != nil {
		t.Fatalf("throttle does not adapt with only its package imported: %v", err)
	}
	json := string(adapted)
	header := strings.Index(json, `"handler":"headers"`)
	own := strings.Index(json, `"handler":"throttle"`)
	respond := strings.Index(json, `"handler":"static_response"`)
	if header < 0 || own < 0 || respond < 0 || !(header < own && own < respond) {
		t.Fatalf("want headers, throttle, static_response in that order (throttle is ordered before basic_auth), got %s", json)
	}
}
