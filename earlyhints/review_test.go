package earlyhints

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestHandlerNoHintsToHTTP10: RFC 9110 §15.2 sends no 1xx to an HTTP/1.0
// client: with http1 on, HTTP/1.1 gets the PoP's 103 and HTTP/1.0 none,
// neither the PoP's nor the origin's own.
func TestHandlerNoHintsToHTTP10(t *testing.T) {
	o := &origin{status: 200, early: []string{"</e.js>; rel=preload; as=script"}, header: http.Header{"Content-Type": {"text/html"}}}
	for _, tc := range []struct {
		minor int
		want  []int
	}{{1, []int{103, 103, 200}}, {0, []int{200}}} {
		h := newHandler(t, &Handler{HTTP1: true})
		h.store.put("example.com /", []string{"</app.css>; rel=preload; as=style"})
		r := navigation("/", 1)
		r.ProtoMinor, r.Proto = tc.minor, "HTTP/1."+string(rune('0'+tc.minor))
		rec := serve(t, h, r, o)
		var got []int
		for _, w := range rec.written {
			got = append(got, w.status)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: wrote %v, want %v", r.Proto, got, tc.want)
		}
	}
}

// TestHandlerKeysOnTheOriginalPath: rewrite, uri and try_files run before
// early_hints; behind a front controller every page is /index.php by the
// time it gets here. The key is the path the client asked for, so two
// pages keep their own links.
func TestHandlerKeysOnTheOriginalPath(t *testing.T) {
	h := newHandler(t, &Handler{})
	asked := func(path string) *http.Request {
		r := navigation(path, 2)
		orig := *r
		orig.URL = &url.URL{Path: path}
		r = r.WithContext(context.WithValue(r.Context(), caddyhttp.OriginalRequestCtxKey, orig))
		r.URL.Path, r.URL.RawQuery = "/index.php", "" // try_files {path} /index.php
		return r
	}
	serve(t, h, asked("/a"), page("</a.js>; rel=preload; as=script"))
	serve(t, h, asked("/b"), page("</b.js>; rel=preload; as=script"))
	for path, want := range map[string]string{"/a": "</a.js>; rel=preload; as=script", "/b": "</b.js>; rel=preload; as=script"} {
		rec := serve(t, h, asked(path), page())
		if rec.written[0].status != 103 || !slices.Equal(rec.written[0].links, []string{want}) {
			t.Errorf("%s: %+v; want a 103 with %q", path, rec.written, want)
		}
	}
	if got := h.store.getString("example.com /index.php"); got != nil {
		t.Errorf("learned under the rewritten path: %q", got)
	}
}

// TestHandlerRefusesUserinfoLinks: a learned link with userinfo
// ("https://evil.example@cdn.example.net/a.js" is a request to
// cdn.example.net that shows evil.example first) is not learned, allowed
// origin or not; a configured one is refused.
func TestHandlerRefusesUserinfoLinks(t *testing.T) {
	h := newHandler(t, &Handler{AllowOrigin: []string{"https://cdn.example.net"}})
	serve(t, h, navigation("/", 2), page("<https://evil.example@cdn.example.net/a.js>; rel=preload; as=script",
		"<https://u:p@example.com/b.js>; rel=preload", "<//evil.example@cdn.example.net/c.js>; rel=preload",
		"<https://cdn.example.net/ok.js>; rel=preload"))
	if got, want := h.store.getString("example.com /"), []string{"<https://cdn.example.net/ok.js>; rel=preload"}; !slices.Equal(got, want) {
		t.Errorf("learned %q, want %q", got, want)
	}
	for _, u := range []string{"https://u@cdn.example.net/x.js", "https://u:p@cdn.example.net/x.js"} {
		c := &Handler{AllowOrigin: []string{"https://cdn.example.net"}, Links: []Link{{URL: u, Rel: "preload", As: "script"}}}
		if err := c.Validate(); err == nil {
			t.Errorf("link %s accepted", u)
		}
	}
}
