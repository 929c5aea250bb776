package clientip_test

import (
	"testing"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-edgekit/edgekit/clientip"
	"github.com/caddy-edgekit/edgekit/internal/adapttest"
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
	adapted, err := adapttest.Adapt(caddyfileText)
	if err != nil {
		t.Fatalf("client_ip does not adapt with only its package imported: %v", err)
	}
	adapttest.HandlerOrder(t, adapted, "client_ip", "headers")
}
