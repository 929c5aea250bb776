package earlyhints

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestLearnable: only a 2xx HTML response a shared cache could give anyone
// is learned from.
func TestLearnable(t *testing.T) {
	html := func(kv ...string) http.Header {
		h := http.Header{"Content-Type": {"text/html; charset=utf-8"}}
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	for _, tc := range []struct {
		name   string
		status int
		h      http.Header
		auth   bool
		want   bool
	}{
		{"plain html", 200, html(), false, true},
		{"vary accept-encoding", 200, html("Vary", "Accept-Encoding"), false, true},
		{"not html", 200, http.Header{"Content-Type": {"text/plain"}}, false, false},
		{"no content type", 200, http.Header{}, false, false},
		{"404", 404, html(), false, false},
		{"304", 304, html(), false, false},
		{"set-cookie", 200, html("Set-Cookie", "s=1"), false, false},
		{"private", 200, html("Cache-Control", "max-age=60, Private"), false, false},
		{"private with field names", 200, html("Cache-Control", `private="X-User"`), false, false},
		{"no-store", 200, html("Cache-Control", "no-store"), false, false},
		{"vary cookie", 200, html("Vary", "Accept-Encoding, Cookie"), false, false},
		{"vary star", 200, html("Vary", "*"), false, false},
		{"authorization", 200, html(), true, false},
		{"authorization public", 200, html("Cache-Control", "public, max-age=60"), true, true},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.auth {
			r.Header.Set("Authorization", "Bearer x")
		}
		if got := learnable(r, tc.status, tc.h); got != tc.want {
			t.Errorf("%s: learnable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestIsHTML: text/html in any case with any parameters, nothing else.
func TestIsHTML(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/html": true, "Text/HTML; charset=utf-8": true, " text/html ;q=1": true,
		"text/html;charset=utf-8": true, "text/html\t;q=1": true, "text/html x": false,
		"text/htmlx": false, "text/plain": false, "": false, "application/xhtml+xml": false, "text/htm": false,
	} {
		if got := isHTML(ct); got != want {
			t.Errorf("isHTML(%q) = %v, want %v", ct, got, want)
		}
	}
}
