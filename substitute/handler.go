package substitute

import (
	"fmt"
	"maps"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// ServeHTTP substitutes the response of next when its type, status and
// encoding are eligible.
//
// Ranges: the Range header is passed on, so ranges of other types (video)
// keep working. If the answer is a 206 of a substitutable type (or a
// multipart/byteranges one, which may hide any type), its body is
// discarded and the request is sent again without Range and If-Range: the
// client gets the full substituted 200. Only GETs and HEADs without a body
// are sent again; otherwise such a 206 becomes a 502, never an
// unsubstituted fragment.
//
// HEAD gets the header decisions GET would (RFC 9110 §9.3.2: the same
// fields, or without those only known while generating the content), so
// its answer announces no Content-Length and the weak ETag where GET's body
// is substituted.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.Method == http.MethodConnect {
		metrics.skipped.Inc()
		return next.ServeHTTP(w, r)
	}
	rw := h.getWriter(w, r)
	defer h.putWriter(rw)

	var saved http.Header
	// A GET or HEAD without a body can be sent again. HTTP/3 reports an
	// unknown length (-1) for every request without Content-Length.
	mayRetry := (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.ContentLength <= 0 && len(r.TransferEncoding) == 0 && len(r.Header["Range"]) > 0
	if mayRetry {
		saved = w.Header().Clone() // what outer handlers set, for the retry
	}
	err := next.ServeHTTP(rw, r)
	if err == nil && rw.mode == discarding && mayRetry {
		metrics.rangeRetries.Inc()
		hdr := w.Header()
		clear(hdr)
		maps.Copy(hdr, saved)
		r.Header.Del("Range")
		r.Header.Del("If-Range")
		rw.resetResponse()
		err = next.ServeHTTP(rw, r)
	}
	if err != nil {
		if isDecodeError(rw.finish(true)) {
			panic(http.ErrAbortHandler) // see below
		}
		return err
	}
	if rw.mode == discarding { // a partial body that was not, or could not be, retried
		// The 502 describes no representation: drop the 206's fields, whose
		// Content-Length would frame the error's empty body as a cut one.
		hdr := w.Header()
		for _, name := range partialFields {
			delete(hdr, name)
		}
		why := "a request that cannot be sent again without Range (not a GET or HEAD without a body)"
		switch {
		case mayRetry:
			why = "the request sent again without Range"
		case len(r.Header["Range"]) == 0:
			why = "a request without Range"
		}
		return caddyhttp.Error(http.StatusBadGateway,
			fmt.Errorf("substitute: partial response (206) of a substitutable type to %s", why))
	}
	if !rw.wroteHeader {
		// next wrote nothing: net/http sends the header when the chain
		// returns, with the fields to rewrite still in it.
		rw.rewriteHeaders(w.Header(), false)
	}
	if ferr := rw.finish(false); ferr != nil {
		if isDecodeError(ferr) {
			// The body is cut short, corrupt or followed by trailing bytes,
			// or decoding it panicked: end the response so that the client
			// sees it broken (HTTP/1.1: no last chunk; HTTP/2: stream
			// reset), as reverse_proxy does for a short upstream body.
			panic(http.ErrAbortHandler)
		}
		h.logger.Debug("substituting response body", zap.Error(ferr))
	}
	return nil
}

// partialFields are the fields of a 206 that describe its representation
// or frame its body.
var partialFields = [...]string{"Content-Length", "Content-Range", "Content-Type", "Content-Encoding",
	"Etag", "Last-Modified", "Accept-Ranges", "Transfer-Encoding", "Trailer"}

// typeMatches reports whether a media type is in Types (case-insensitive;
// "text/*" matches every text type).
func (h *Handler) typeMatches(mediaType string) bool {
	if mediaType == "" {
		return false
	}
	for _, t := range h.Types {
		if strings.HasSuffix(t, "/*") {
			if len(mediaType) > len(t)-1 && strings.EqualFold(mediaType[:len(t)-1], t[:len(t)-1]) {
				return true
			}
		} else if strings.EqualFold(mediaType, t) {
			return true
		}
	}
	return false
}

// statusMatches reports whether status is selected by Status.
func (h *Handler) statusMatches(status int) bool {
	if len(h.Status) == 0 {
		return true
	}
	for _, s := range h.Status {
		if caddyhttp.StatusCodeMatches(status, s) {
			return true
		}
	}
	return false
}
