package dictionary

import (
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
)

// deltaKey names a dictionary-compressed response in the delta cache: the
// same resource (origin, path and query) with the same strong ETag,
// compressed in the same coding against the same dictionary, is the same
// bytes.
type deltaKey struct {
	origin, uri string
	hash        [hashSize]byte
	etag        string
	coding      string
}

// plan is what the request asks for: a dictionary-compressed response
// against dict in coding, or nothing (dict nil).
type plan struct {
	dict   *dict
	coding string
}

// ServeHTTP marks eligible responses as dictionaries and compresses
// responses against the dictionary the client names, when it may.
//
// Only GET responses are marked or compressed. A HEAD gets the header
// fields the GET would (RFC 9110 §9.3.2): Vary, Use-As-Dictionary, and for
// a delta Content-Encoding and the coded ETag, without a body stored or
// compressed (see responseWriter.head).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if len(r.Header["Available-Dictionary"]) > 0 {
			metrics.missBy[missIneligible].Inc()
		}
		return next.ServeHTTP(w, r)
	}
	// The browser matches patterns against the URL it asked for, before
	// handle_path or rewrite changed it.
	orig := r
	if o, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok {
		orig = &o
	}
	origin := originOf(r)
	path := orig.URL.EscapedPath()

	rw := &responseWriter{
		ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w},
		h:                     h,
		req:                   r,
		origin:                origin,
		path:                  path,
		uri:                   orig.URL.RequestURI(),
		mark:                  h.match.matches(path) && requestReadable(r) && len(r.Header["Authorization"]) == 0,
		head:                  r.Method == http.MethodHead,
		start:                 time.Now(),
	}
	if len(r.Header["Available-Dictionary"]) > 0 {
		var reason string
		rw.plan, reason = h.planDelta(r, origin, path)
		rw.miss(reason)
	}
	rw.stripETagSuffix()
	// reverse_proxy aborts a response whose upstream or client fails
	// mid-body by panicking (http.ErrAbortHandler): what the response holds
	// must be given back then too, or a few cut streams would take every
	// encoder slot and the whole capture budget for good.
	defer rw.releaseHeld()
	err := next.ServeHTTP(rw, r)
	if err != nil {
		rw.finish(true)
		return err
	}
	return rw.finish(false)
}

// planDelta decides from the request alone whether the response may be
// compressed against a stored dictionary, or names the reason it may not.
func (h *Handler) planDelta(r *http.Request, origin, path string) (plan, string) {
	hash, err := parseAvailableDictionary(r.Header["Available-Dictionary"])
	if err != nil {
		return plan{}, missMalformed
	}
	coding := ""
	for _, e := range encode.AcceptedEncodings(r, h.Encodings) {
		if h.offers(e) {
			coding = e
			break
		}
	}
	if coding == "" {
		return plan{}, missEncoding
	}
	d, ok := h.store.lookup(origin, hash)
	if !ok {
		return plan{}, missUnknown
	}
	if !d.match.matches(path) || !destMatches(d.dests, r.Header.Get("Sec-Fetch-Dest")) {
		return plan{}, missMismatch
	}
	if !requestReadable(r) {
		return plan{}, missCrossOrigin
	}
	return plan{dict: d, coding: coding}, ""
}

// destMatches reports whether a request with Sec-Fetch-Dest dest may use a
// dictionary marked for dests (RFC 9842, match-dest: an empty list matches
// every destination). A request without Sec-Fetch-Dest (not a browser)
// is not refused for it.
func destMatches(dests []string, dest string) bool {
	if len(dests) == 0 || dest == "" {
		return true
	}
	for _, d := range dests {
		if d == dest {
			return true
		}
	}
	return false
}

// originOf is the request's origin as the store keys it: scheme, and the
// Host as the client sent it (with its port), lowercased.
func originOf(r *http.Request) string {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return scheme + strings.ToLower(r.Host)
}

// stripETagSuffix removes, from If-None-Match, the suffix this handler
// appends to strong ETags for the representation this request would get
// (the planned coding against the planned dictionary), so that the
// handlers below recognise their own ETag (as encode does for the coding
// it chose), and remembers it for the 304. A tag naming another coding or
// dictionary is left as it is: the origin does not recognise it and sends
// the response in full, since a 304 would validate bytes compressed
// against a dictionary this request does not name (a shared cache may
// send the ETags of all its variants, RFC 9111 §4.3.1).
func (rw *responseWriter) stripETagSuffix() {
	inm := rw.req.Header["If-None-Match"]
	if len(inm) == 0 || rw.plan.dict == nil {
		return
	}
	joined := strings.Join(inm, ", ")
	suffix := etagSuffix(rw.plan.coding, rw.plan.dict.key.hash)
	if stripped := strings.ReplaceAll(joined, suffix+`"`, `"`); stripped != joined {
		rw.req.Header["If-None-Match"] = []string{stripped}
		rw.notModifiedCoded = true
	}
}
