package earlyhints_test

import (
	"testing"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-edgekit/edgekit/earlyhints"
	"github.com/caddy-edgekit/edgekit/internal/adapttest"
)

// TestDirectiveAlone checks that this package alone gives the early_hints
// directive and its default order: after the handlers that refuse a
// request (basic_auth, forward_auth), before the ones that answer it.
func TestDirectiveAlone(t *testing.T) {
	const caddyfileText = `:8080 {
	reverse_proxy 127.0.0.1:9000
	encode
	early_hints
	basic_auth {
		u $2a$14$Zkx19XLiW6VYouLHR5NmfOFU0z2GTNmpkT/5qqR7hx4IjWJPDhjvG
	}
}
`
	adapted, err := adapttest.Adapt(caddyfileText)
	if err != nil {
		t.Fatalf("early_hints does not adapt with only its package imported: %v", err)
	}
	adapttest.HandlerOrder(t, adapted, "authentication", "early_hints", "encode", "reverse_proxy")
}
