package clientip_test

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-edgekit/edgekit/clientip"
)

// TestDirectiveAlone checks that this package alone, as in `xcaddy build
// --with github.com/caddy-edgekit/edgekit/clientip`, gives the client_ip
// directive and its default order: no `order` line, and client_ip runs before
// header although written after it.
func TestDirectiveAlone(t *testing.T) {
	const caddyfileText = `:8080 {
	header X-Test 1
	client_ip {
		trusted_proxies private_ranges
	}
	respond "ok"
}
`
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfileText), nil)
	if err != nil {
		t.Fatalf("client_ip does not adapt with only its package imported: %v", err)
	}
	json := string(adapted)
	own := strings.Index(json, `"handler":"client_ip"`)
	header := strings.Index(json, `"handler":"headers"`)
	if own < 0 || header < 0 || own > header {
		t.Fatalf("client_ip must come first (registered order: after tracing), got %s", json)
	}
}
