package dictionary_test

import (
	"strings"
	"testing"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-edgekit/edgekit/dictionary"
	"github.com/caddy-edgekit/edgekit/internal/adapttest"
)

// TestDirectiveAlone checks that this package alone, as in `xcaddy build
// --with github.com/caddy-edgekit/edgekit/dictionary`, gives the directive
// and its default order: right after encode (inside encode's writer),
// whatever the file's order.
func TestDirectiveAlone(t *testing.T) {
	const caddyfileText = `:8080 {
	file_server
	dictionary /assets/* {
		match /assets/app.*.js
	}
	encode zstd gzip
}
`
	adapted, err := adapttest.Adapt(caddyfileText)
	if err != nil {
		t.Fatalf("dictionary does not adapt with only its package imported: %v", err)
	}
	adapttest.HandlerOrder(t, adapted, "encode", "dictionary", "file_server")
}

func TestCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct{ body, wantErr string }{
		{"dictionary /assets/* /assets/app.*.js", ""},
		// A first argument starting with / is the route's matcher.
		{"dictionary /assets/app.*.js", "match: empty"},
		{"dictionary {\n\t\tmatch /a/*.js\n\t\tmatch_dest script style\n\t\tid v1\n\t\tencodings dcb dcz\n\t\tmax_size 1MiB\n\t\tstore_size 8MiB\n\t\tdelta_cache_size off\n\t\tzstd_level best\n\t\tdcb_quality 6\n\t\tdcb_window 20\n\t\tmax_encoders 8\n\t}", ""},
		{"dictionary", "match: empty"},
		{"dictionary * assets/*", "must be a path starting with /"},
		{"dictionary * /a/:id", "URLPattern syntax"},
		{"dictionary {\n\t\tmatch /a/*\n\t\tencodings gzip\n\t}", `"gzip": must be dcz or dcb`},
		{"dictionary {\n\t\tmatch /a/*\n\t\tmax_size 1GiB\n\t}", "max_size"},
		{"dictionary {\n\t\tmatch /a/*\n\t\tmax_size 8MiB\n\t\tstore_size 4MiB\n\t}", "store_size"},
		// With dcb, one dictionary of max_size counts its Brotli tables too.
		{"dictionary {\n\t\tmatch /a/*\n\t\tmax_size 1MiB\n\t\tstore_size 2MiB\n\t}", "must hold one dictionary of max_size"},
		{"dictionary {\n\t\tmatch /a/*\n\t\tencodings dcz\n\t\tmax_size 1MiB\n\t\tstore_size 2MiB\n\t}", ""},
		{"dictionary {\n\t\tmatch /a/*\n\t\tdcb_quality 1\n\t}", "dcb_quality 1"},
		{"dictionary {\n\t\tmatch /a/*\n\t\tdcb_window 25\n\t}", "dcb_window 25"},
		{"dictionary {\n\t\tmatch /a/*\n\t\tmax_encoders 5000\n\t}", "max_encoders 5000"},
		{"dictionary {\n\t\tmatch /a/*\n\t\tmax_encoders -1\n\t}", "max_encoders -1"},
		{"dictionary {\n\t\tmatch /a/*\n\t\tzstd_level 19\n\t}", "zstd_level"},
		{"dictionary {\n\t\tmatch /a/*\n\t\tid \"a b\"\n\t}", "id"},
		{"dictionary {\n\t\tmatch /a/*\n\t\tcolour red\n\t}", "unknown subdirective"},
	} {
		err := adapttest.Validate(":8080 {\n\t" + tc.body + "\n\trespond ok\n}\n")
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.body, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: want an error containing %q, got %v", tc.body, tc.wantErr, err)
		}
	}
}
