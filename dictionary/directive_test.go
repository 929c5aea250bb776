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
		{"dictionary {\n\t\tmatch /a/*.js\n\t\tmatch_dest script style\n\t\tid v1\n\t\tencodings dcb dcz\n\t\tmax_size 1MiB\n\t\tstore_size 8MiB\n\t\tdelta_cache_size off\n\t\tzstd_level best\n\t\tdcb_quality 6\n\t\tdcb_window 20\n\t\tmax_encoders 8\n\t\tencoder_write_idle 5s\n\t\tencoder_min_rate 16KiB\n\t}", ""},
		{"dictionary {\n\t\tmatch /a/*\n\t\tencoder_min_rate off\n\t}", "must be a size per second"},
		{"dictionary {\n\t\tmatch /a/*\n\t\tencoder_write_idle 10ms\n\t}", "encoder_write_idle 10ms"},
		{"dictionary {\n\t\tmatch /a/*\n\t\tencoder_write_idle soon\n\t}", "must be a duration"},
		{"dictionary {\n\t\tmatch /a/*\n\t\tencoder_min_rate 2GiB\n\t}", "encoder_min_rate"},
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

// TestCaddyfileErrorsNameTheLine: a value out of range is refused while the
// Caddyfile is adapted, with its line, by the same check Validate makes for
// JSON (options.go). store_size depends on other options and is checked by
// Validate once all are read.
func TestCaddyfileErrorsNameTheLine(t *testing.T) {
	for _, opt := range []string{
		"match /a/:id", "match_dest \"a b\"", "id \"a b\"", "encodings gzip", "max_size 1GiB",
		"delta_cache_size 100GiB", "zstd_level 19", "dcb_quality 1", "dcb_window 25", "max_encoders 0",
		"encoder_write_idle 2h", "encoder_min_rate 2GiB",
	} {
		caddyfileText := ":8080 {\n\tdictionary {\n\t\tmatch /a/*\n\t\t" + opt + "\n\t}\n\trespond ok\n}\n"
		if strings.HasPrefix(opt, "match ") {
			caddyfileText = ":8080 {\n\tdictionary {\n\t\t" + opt + "\n\t}\n\trespond ok\n}\n"
		}
		_, err := adapttest.Adapt(caddyfileText)
		line := ":4"
		if strings.HasPrefix(opt, "match ") {
			line = ":3"
		}
		if err == nil || !strings.Contains(err.Error(), "Caddyfile"+line) || !strings.Contains(err.Error(), strings.Fields(opt)[0]) {
			t.Errorf("%s: adapting gave %v; want a refusal of %s at Caddyfile%s", opt, err, strings.Fields(opt)[0], line)
		}
	}
}
