package substitute_test

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-edgekit/edgekit/substitute"
)

// TestDirectiveAlone checks that this package alone, as in `xcaddy build
// --with github.com/caddy-edgekit/edgekit/substitute`, gives the substitute
// directive and its default order (after encode, so it sees the body before
// it is compressed): no `order` line, whatever the file's order.
func TestDirectiveAlone(t *testing.T) {
	const caddyfileText = `:8080 {
	respond "hello"
	substitute {
		replace "hello" "bye"
	}
	encode gzip
}
`
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfileText), nil)
	if err != nil {
		t.Fatalf("substitute does not adapt with only its package imported: %v", err)
	}
	json := string(adapted)
	encode := strings.Index(json, `"handler":"encode"`)
	own := strings.Index(json, `"handler":"substitute"`)
	respond := strings.Index(json, `"handler":"static_response"`)
	if encode < 0 || own < 0 || respond < 0 || !(encode < own && own < respond) {
		t.Fatalf("want encode, substitute, static_response in that order (substitute is ordered after encode), got %s", json)
	}
}

