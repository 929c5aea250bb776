package earlyhints

import (
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestValidateRefuses: what the Caddyfile refuses, Validate refuses in
// JSON too, each error naming the fix.
func TestValidateRefuses(t *testing.T) {
	for _, tc := range []struct {
		h    Handler
		want string
	}{
		{Handler{AllowOrigin: []string{"https://*.example.com"}}, "no wildcards"},
		{Handler{AllowOrigin: []string{"https://*"}}, "no wildcards"},
		{Handler{AllowOrigin: []string{"https://cdn.example.com:99999"}}, `port "99999" must be 1-65535`},
		{Handler{AllowOrigin: []string{"https://cdn.example.com:0"}}, `port "0" must be 1-65535`},
		{Handler{AllowOrigin: []string{"https://cdn.example.com:0443"}}, `port "0443" must be 1-65535`},
		{Handler{AllowOrigin: []string{"https://cdn.example.com:"}}, "no port after"},
		{Handler{AllowOrigin: []string{"http://cdn.example.com:80"}}, "write http://cdn.example.com, without :80"},
		{Handler{AllowOrigin: []string{"https://cdn%2eexample.com"}}, "want an origin"},
		{Handler{AllowOrigin: []string{"https://cdn_example.com"}}, "not a host name"},
		{Handler{AllowOrigin: []string{"https://cdn..example.com"}}, "not a host name"},
		{Handler{AllowOrigin: []string{"https://[::1"}}, "want an origin"},
		{Handler{AllowOrigin: []string{"https://[fe80::1%25lo]"}}, "not an IPv6 address"},
		{Handler{MaxPaths: maxMaxPaths + 1}, "at most 10000000"},
		{Handler{MaxBytes: maxMaxBytes + 1}, "at most 1073741824 (1 GiB)"},
		{Handler{Links: []Link{{URL: "https://cdn.example.com/a.js", Rel: "preload", As: "script"}}}, `add "allow_origin https://cdn.example.com"`},
		{Handler{AllowOrigin: []string{"https://cdn.example.com"}, Links: []Link{{URL: "http://cdn.example.com/a.js", Rel: "preload"}}}, `add "allow_origin http://cdn.example.com"`},
		{Handler{AllowOrigin: []string{"https://cdn.example.com"}, Links: []Link{{URL: "//cdn.example.com/a.js", Rel: "preload"}}}, "write it with its scheme"},
		{Handler{Links: []Link{{URL: "javascript:alert(1)", Rel: "preload"}}}, "an http or https URL"},
		{Handler{MaxPaths: -1}, "max_paths -1: must not be negative"},
		{Handler{MaxBytes: -1}, "max_bytes -1: must not be negative"},
		{Handler{MaxAge: -1}, "max_age -1: must not be negative"},
		{Handler{MaxBytes: entrySize - 1}, "max_bytes 159: at least 18848"},
		{Handler{MaxBytes: minMaxBytes - 1}, "max_bytes 18847: at least 18848"},
		{Handler{Links: []Link{{URL: "/{http.request.uri.query}", Rel: "preload"}}}, "placeholders are not expanded"},
		{Handler{Links: []Link{{URL: "/a.js?v={env.V}", Rel: "preload"}}}, "placeholders are not expanded"},
		{Handler{Links: slices.Repeat([]Link{{URL: "/a.js", Rel: "preload"}}, maxManualLinks+1)}, "links: 17 links; at most 16"},
	} {
		err := tc.h.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Validate() = %v, want an error containing %q", tc.h, err, tc.want)
		}
	}
}

// TestValidateAccepts: origins and links that are fine stay fine.
func TestValidateAccepts(t *testing.T) {
	for _, h := range []Handler{
		{AllowOrigin: []string{"https://cdn.example.com", "http://127.0.0.1:8080", "https://[2001:db8::1]:8443", "https://CDN.Example.com"}},
		{MaxPaths: maxMaxPaths, MaxBytes: maxMaxBytes},
		{MaxBytes: minMaxBytes},
		{Links: []Link{{URL: "/a.js?v=%7Bx%7D", Rel: "preload"}}},
		{Links: []Link{{URL: "/app.css", Rel: "preload", As: "style"}, {URL: "app.js", Rel: "modulepreload"}}},
		{AllowOrigin: []string{"https://cdn.example.com"}, Links: []Link{
			{URL: "https://cdn.example.com", Rel: "preconnect"},
			{URL: "https://CDN.example.com:443/font.woff2", Rel: "preload", As: "font"},
		}},
	} {
		if err := h.Validate(); err != nil {
			t.Errorf("%+v: %v", h, err)
		}
	}
}

// TestCaddyfileRefusesOptionTwice: a single-value option written twice
// would silently replace the first; each is refused (allow_origin and
// link add up, and are not).
func TestCaddyfileRefusesOptionTwice(t *testing.T) {
	for _, line := range []string{"hint_on any", "http1 on", "max_paths 100", "max_bytes 100000", "max_age 1h", "learn off"} {
		d := caddyfile.NewTestDispenser("early_hints {\n" + line + "\n" + line + "\n}")
		err := new(Handler).UnmarshalCaddyfile(d)
		opt, _, _ := strings.Cut(line, " ")
		if err == nil || !strings.Contains(err.Error(), opt+" given twice") {
			t.Errorf("%s twice: %v", opt, err)
		}
	}
	d := caddyfile.NewTestDispenser("early_hints {\nallow_origin https://a.example\nallow_origin https://b.example\nlink /a.js preload\nlink /b.js preload\n}")
	if err := new(Handler).UnmarshalCaddyfile(d); err != nil {
		t.Errorf("repeated allow_origin and link: %v", err)
	}
}
