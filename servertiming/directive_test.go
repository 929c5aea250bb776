package servertiming_test

import (
	"testing"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/caddy-edgekit/edgekit/internal/adapttest"
	_ "github.com/caddy-edgekit/edgekit/servertiming"
)

// TestDirectiveAlone checks that this package alone, as in `xcaddy build
// --with github.com/caddy-edgekit/edgekit/servertiming`, gives the
// server_timing directive and its default order: first, before Caddy's
// own first directives, although written last.
func TestDirectiveAlone(t *testing.T) {
	const caddyfileText = `:8080 {
	vars foo bar
	header X-Test 1
	respond "ok"
	server_timing
}
`
	adapted, err := adapttest.Adapt(caddyfileText)
	if err != nil {
		t.Fatalf("server_timing does not adapt with only its package imported: %v", err)
	}
	adapttest.HandlerOrder(t, adapted, "server_timing", "vars", "headers", "static_response")
}
