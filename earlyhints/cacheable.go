package earlyhints

import (
	"net/http"
	"strings"
)

// sharedCacheable reports whether a shared cache could give the response
// to r to any client asking for the same URL (RFC 9111 §3, §3.5, §4.1): no
// Set-Cookie, not private or no-store, no Authorization on the request
// unless the response is public, and a Vary naming nothing but
// Accept-Encoding (or Available-Dictionary). Only such a response is
// learned from: its links are then the same for everyone.
//
// It mirrors dictionary/header.go's sharedCacheable (module packages never
// import each other), with RFC 9111 §3.5's "public" exception for an
// authorised request; change both together.
func sharedCacheable(r *http.Request, h http.Header) bool {
	cc := h["Cache-Control"]
	if len(h["Set-Cookie"]) > 0 || hasToken(cc, "private") || hasToken(cc, "no-store") {
		return false
	}
	if len(r.Header["Authorization"]) > 0 && !hasToken(cc, "public") {
		return false
	}
	for _, v := range h["Vary"] {
		for item := range strings.SplitSeq(v, ",") {
			switch item = strings.TrimSpace(item); {
			case item == "", strings.EqualFold(item, "Accept-Encoding"), strings.EqualFold(item, "Available-Dictionary"):
			default:
				return false
			}
		}
	}
	return true
}

// learnable reports whether the final response (status, header h) to r is
// one whose links are learned: a 2xx HTML page a shared cache could give
// anyone.
func learnable(r *http.Request, status int, h http.Header) bool {
	if status < 200 || status > 299 {
		return false
	}
	// Indexed, not Get: the keys of a response header are canonical (a
	// non-canonical one is at worst not learned from).
	if ct := h["Content-Type"]; len(ct) == 0 || !isHTML(ct[0]) {
		return false
	}
	return sharedCacheable(r, h)
}

// isHTML reports whether a Content-Type is text/html (any case, any
// parameters), without mime.ParseMediaType's allocations: it runs on
// every response the handler passes.
func isHTML(ct string) bool {
	const html = "text/html"
	if len(ct) > 0 && (ct[0] == ' ' || ct[0] == '\t') {
		ct = strings.TrimLeft(ct, " \t")
	}
	if strings.HasPrefix(ct, html) { // as written almost always: no EqualFold
		rest := ct[len(html):]
		if rest == "" || rest[0] == ';' {
			return true
		}
	}
	if len(ct) < len(html) || !strings.EqualFold(ct[:len(html)], html) {
		return false
	}
	rest := strings.TrimLeft(ct[len(html):], " \t")
	return rest == "" || rest[0] == ';'
}

// hasToken reports whether a comma-separated header has token (any case);
// as dictionary/header.go's.
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			if name, _, _ := strings.Cut(item, "="); strings.EqualFold(strings.TrimSpace(name), token) {
				return true
			}
		}
	}
	return false
}
