package ratelimit_test

import (
	"testing"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/caddy-edgekit/edgekit/internal/adapttest"
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
	adapted, err := adapttest.Adapt(caddyfileText)
	if err != nil {
		t.Fatalf("throttle does not adapt with only its package imported: %v", err)
	}
	adapttest.HandlerOrder(t, adapted, "headers", "throttle", "static_response")
}
