package substitute_test

import (
	"strings"
	"testing"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/caddy-edgekit/edgekit/internal/adapttest"
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
	adapted, err := adapttest.Adapt(caddyfileText)
	if err != nil {
		t.Fatalf("substitute does not adapt with only its package imported: %v", err)
	}
	adapttest.HandlerOrder(t, adapted, "encode", "substitute", "static_response")
}

// TestReplacementDollar: a literal rule writes $ as is, as nginx's sub_filter
// and Caddy's replace-response do, so `replace "price" "$5"` is valid; a
// regex rule reads $ references as regexp.Expand does.
func TestReplacementDollar(t *testing.T) {
	for _, tc := range []struct{ rule, wantErr string }{
		{`replace "price" "$5"`, ""},
		{`replace "a" "$1é $$"`, ""},
		{`regex "(\d+)€" "${1}é"`, ""},
		{`regex "(\d+)€" "$1é"`, `refers to group "1é"`},
		{`regex "(\d+)€" "$01"`, `refers to group "01"`},
	} {
		caddyfileText := ":8080 {\n\tsubstitute {\n\t\t" + tc.rule + "\n\t}\n}\n"
		err := adapttest.Validate(caddyfileText)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.rule, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: want an error containing %q, got %v", tc.rule, tc.wantErr, err)
		}
	}
}
