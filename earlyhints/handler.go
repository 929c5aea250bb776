package earlyhints

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// ServeHTTP sends a 103 with the links known for the request's page, if
// it is a navigation that gets hints, then lets the request go on,
// learning from its response.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.Method != http.MethodGet {
		return next.ServeHTTP(w, r)
	}
	// The key is looked up in a buffer on the stack (the map lookup of a
	// string([]byte) does not allocate); the string is made only when a
	// response turns out learnable.
	var hinted []string
	if h.hints(r) {
		var buf [keyBufLen]byte
		key, ok := appendPageKey(buf[:0], r)
		if !ok {
			return next.ServeHTTP(w, r)
		}
		hinted = h.hintLinks(key)
		if len(hinted) > 0 {
			hdr := w.Header()
			prev, had := hdr["Link"]
			// Clipped: the slice is the store's, shared; an append to the
			// field must not write into it.
			hdr["Link"] = slices.Clip(hinted)
			w.WriteHeader(http.StatusEarlyHints)
			// The final response's Link fields are the origin's alone.
			if had {
				hdr["Link"] = prev
			} else {
				delete(hdr, "Link")
			}
			metrics.sent.Inc()
		}
	}
	if !h.learn {
		return next.ServeHTTP(w, r)
	}
	lw := writers.Get().(*writer)
	*lw = writer{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, h: h, r: r, hinted: hinted}
	err := next.ServeHTTP(lw, r)
	*lw = writer{} // nothing of this request stays reachable from the pool
	writers.Put(lw)
	return err
}

// writers are pooled, as encode's are: a writer is not used after the
// handler chain returns (Caddy's server finishes the response itself).
var writers = sync.Pool{New: func() any { return new(writer) }}

// hints reports whether r gets a 103: a navigation (unless hint_on any)
// over HTTP/2 or HTTP/3 (or HTTP/1.1 with http1 on; never HTTP/1.0,
// which RFC 9110 §15.2 sends no 1xx).
func (h *Handler) hints(r *http.Request) bool {
	if r.ProtoMajor < 2 && (!h.HTTP1 || !r.ProtoAtLeast(1, 1)) {
		return false
	}
	// Indexed, not Get: the servers (HTTP/1, 2 and 3) canonicalise request
	// header keys, and Get would canonicalise this one on every request.
	return h.HintOn == HintAny || firstValue(r.Header["Sec-Fetch-Mode"]) == "navigate"
}

func firstValue(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return values[0]
}

// hintLinks are the configured links and then the learned ones not
// configured already.
func (h *Handler) hintLinks(key []byte) []string {
	learned := h.store.get(key)
	if len(h.manual) == 0 {
		return learned
	}
	out := append([]string(nil), h.manual...)
	for _, l := range learned {
		if !contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// keyBufLen is the stack buffer a lookup's key is built in: longer keys
// (up to maxKeyLen) cost an allocation.
const keyBufLen = 256

// appendPageKey appends the store key of r to b: its host (lowercased)
// and path, without the query (a page's assets rarely depend on it, and a
// query per visitor would flood the store); false when too long to keep.
// The path is the one the client asked for, before rewrite, uri or
// try_files (which run before this handler) changed it: behind a front
// controller ("try_files {path} /index.php") every page would otherwise
// share one entry, and the last page seen would set every page's hints.
func appendPageKey(b []byte, r *http.Request) ([]byte, bool) {
	u := r.URL
	// Caddy keeps a copy of the request as it came (without its Host,
	// which no handler before this one rewrites).
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
		u = orig.URL
	}
	// Neither allocates when nothing changes (a lowercase host, a path
	// that needs no escaping).
	host, path := strings.ToLower(r.Host), u.EscapedPath()
	if len(host)+len(path)+1 > maxKeyLen {
		return b, false
	}
	b = append(b, host...)
	b = append(b, ' ')
	return append(b, path...), true
}

// pageKey is appendPageKey's key as a string, "" when too long.
func pageKey(r *http.Request) string {
	b, ok := appendPageKey(nil, r)
	if !ok {
		return ""
	}
	return string(b)
}

// sameSite reports whether a link's target may be hinted to r's client:
// a relative reference, or an absolute one (or scheme-relative) to r's own
// scheme and host, or to an allowed origin.
func (h *Handler) sameSite(r *http.Request, target string) bool {
	u, err := url.Parse(target)
	if err != nil {
		return false
	}
	if u.User != nil {
		return false // "https://evil.example@cdn.example.com/a.js": no userinfo in a hint
	}
	if u.Scheme == "" && u.Host == "" {
		return !strings.HasPrefix(target, "//") && u.Opaque == ""
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme == "" {
		scheme = requestScheme(r)
	}
	if scheme != "http" && scheme != "https" {
		return false
	}
	origin := originOf(scheme, u.Host)
	if origin == originOf(requestScheme(r), r.Host) {
		return true
	}
	return contains(h.origins, origin)
}

func requestScheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// learnFrom stores the hintable, allowed links of a learnable response
// under r's key.
func (h *Handler) learnFrom(r *http.Request, values []string) {
	key := pageKey(r)
	if key == "" {
		return
	}
	var links []string
	for _, l := range parseLinks(values) {
		if len(links) == maxPathLinks {
			break
		}
		if h.sameSite(r, l.target) && !contains(links, l.value) && !contains(h.manual, l.value) {
			links = append(links, l.value)
		}
	}
	if h.store.put(key, links) {
		metrics.learned.Inc()
	}
}
