package caddybrotli_test

import (
	"strings"
	"testing"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-edgekit/edgekit/brotli"
	"github.com/caddy-edgekit/edgekit/internal/adapttest"
)

// TestDirectiveAlone checks that this package alone, as in `xcaddy build
// --with github.com/caddy-edgekit/edgekit/brotli`, gives `encode br`: the
// encode directive finds encoders by module ID (http.encoders.br), so the
// module's registration is all it takes.
func TestDirectiveAlone(t *testing.T) {
	const caddyfileText = `:8080 {
	encode {
		br 5
	}
	respond "ok"
}
`
	adapted, err := adapttest.Adapt(caddyfileText)
	if err != nil {
		t.Fatalf("encode br does not adapt with only its package imported: %v", err)
	}
	if !strings.Contains(adapted, `"br":{"quality":5}`) {
		t.Fatalf(`want "br":{"quality":5} in the encode handler, got %s`, adapted)
	}
}
