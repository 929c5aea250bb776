package earlyhints

import (
	"strings"
	"testing"
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
