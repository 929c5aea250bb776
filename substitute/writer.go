package substitute

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-edgekit/edgekit/substitute/internal/engine"
)

// What the writer does with the body of the current response.
type mode uint8

const (
	undecided    mode = iota
	passThrough       // not eligible: untouched, including ReadFrom (sendfile)
	substituting      // through the engine
	copying           // memo: no rule can match; decoded but not scanned
	discarding        // a partial substitutable body that must not reach the client
)

// responseWriter decides at WriteHeader whether the response is
// substituted, and then routes every way a handler writes a body (Write,
// ReadFrom, Flush, FlushError) accordingly. It is pooled per Handler, with
// its engine stream.
type responseWriter struct {
	*caddyhttp.ResponseWriterWrapper
	h    *Handler
	req  *http.Request
	repl *caddy.Replacer
	vars engine.Vars // bound to lookupVar once, so no closure per request

	stream *engine.Stream
	in     input  // gathers the body's writes for the engine
	out    output // coalesces the engine's small writes
	dec    *decoder
	body   io.Writer // where body bytes go when substituting or copying

	mode        mode
	wroteHeader bool
	writeErr    error

	// memoETag is the strong ETag under which finish remembers, for the
	// representation memoKey, that no rule matched (a memo miss), or
	// forgets it when some did; empty when there is nothing to remember.
	memoETag string
	memoKey  memoKey

	hdr headerRewriter // for Handler.Headers (headers.go)

	// timed says a server_timing handler asked for the scan's time, which
	// scan sums (see timeScan).
	timed bool
	scan  time.Duration
}

// The Caddy variables of server_timing's contract (docs/server-timing.md):
// it sets serverTimingOn to true for the handlers inside it, and reads the
// time.Duration this handler leaves in serverTimingSubstitute at the end of
// the body.
const (
	serverTimingOn         = "server_timing"
	serverTimingSubstitute = "server_timing.substitute"
)

func (h *Handler) getWriter(w http.ResponseWriter, r *http.Request) *responseWriter {
	rw, _ := h.writers.Get().(*responseWriter)
	if rw == nil {
		rw = &responseWriter{h: h, ResponseWriterWrapper: new(caddyhttp.ResponseWriterWrapper)}
		rw.vars = rw.lookupVar
	}
	rw.ResponseWriterWrapper.ResponseWriter = w
	rw.req = r
	rw.repl, _ = r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	rw.timed, _ = caddyhttp.GetVar(r.Context(), serverTimingOn).(bool)
	return rw
}

func (h *Handler) putWriter(rw *responseWriter) {
	if rw.dec != nil {
		_ = rw.dec.Close(true)
	}
	rw.ResponseWriterWrapper.ResponseWriter = nil
	rw.req, rw.repl, rw.dec, rw.body = nil, nil, nil, nil
	rw.timed, rw.scan = false, 0
	if rw.stream != nil {
		rw.stream.Reset(nil, nil)
	}
	rw.in.reset(nil)  // drops what an aborted response left
	rw.out.reset(nil) // likewise
	rw.resetResponse()
	h.writers.Put(rw)
}

// resetResponse forgets the current response (before a retry).
func (rw *responseWriter) resetResponse() {
	rw.mode, rw.wroteHeader = undecided, false
	rw.writeErr = nil
	rw.memoETag = ""
}

// lookupVar resolves {placeholders} of replacements for this request only.
func (rw *responseWriter) lookupVar(name string) (string, bool) {
	if rw.repl == nil {
		return "", false
	}
	v, ok := rw.repl.Get(name)
	if !ok {
		return "", false
	}
	return caddy.ToString(v), true
}

// WriteHeader decides what happens to the body and, unless the body is to
// be discarded, sends the header at once (so SSE clients see it before the
// first event).
func (rw *responseWriter) WriteHeader(status int) {
	if rw.wroteHeader {
		return // superfluous; net/http would log it, the status is already out
	}
	if status >= 100 && status <= 199 && status != http.StatusSwitchingProtocols {
		// Informational, not the response; 103's Link is rewritten too,
		// and put back so the final response rewrites the original once.
		rw.rewriteHeaders(rw.Header(), true)
		rw.ResponseWriter.WriteHeader(status)
		rw.restoreHeaders(rw.Header())
		return
	}
	rw.wroteHeader = true
	hdr := rw.Header()
	rw.rewriteHeaders(hdr, false) // every status, type and no-transform: see Handler.Headers
	mediaType := mediaTypeOf(hdr.Get("Content-Type"))
	eligibleType := rw.h.typeMatches(mediaType)
	// The origin forbids changing the content (RFC 9110 §7.7): the body,
	// its validators and its length pass as they are. Only the response's
	// directive binds: the request's addresses caches, and a caller must
	// not switch the rules off with it.
	noTransform := hasToken(hdr["Cache-Control"], "no-transform")

	if status == http.StatusPartialContent && !noTransform && (eligibleType || strings.EqualFold(mediaType, "multipart/byteranges")) {
		// A fragment of a substitutable body must not reach the client,
		// and cannot be substituted (matches may cross its edges; its
		// Content-Range counts unsubstituted bytes). Ask again without
		// Range (ServeHTTP), or fail. multipart/byteranges may hide any type.
		rw.mode = discarding
		return
	}
	enc := parseEncoding(hdr["Content-Encoding"])
	if status == http.StatusNotModified && enc != unknownEncoding && !noTransform {
		rw.notModified(hdr, mediaType, enc)
	}
	eligible := eligibleType && rw.h.statusMatches(status) && bodyAllowed(status) && enc != unknownEncoding
	if !eligible || noTransform {
		rw.mode = passThrough
		// no_transform counts what would otherwise have been changed: a
		// body, a fragment's retry, a 304's validator.
		if noTransform && (eligible || eligibleType && (status == http.StatusPartialContent || status == http.StatusNotModified)) {
			metrics.noTransform.Inc()
		} else {
			metrics.skipped.Inc()
		}
		rw.ResponseWriter.WriteHeader(status)
		return
	}
	metrics.substituted.Inc()

	hdr.Del("Content-Length")
	hdr.Del("Accept-Ranges")
	hdr.Del("Content-Encoding") // decoded below, or identity
	etag := hdr.Get("Etag")
	strong := isStrongETag(etag)
	if strong {
		hdr.Set("Etag", weakETag(etag, enc)) // the bytes differ from the origin's
	}
	if rw.req.Method == http.MethodHead {
		// HEAD announces what GET would (RFC 9110 §9.3.2), the header
		// adjusted above; there is no body to substitute.
		rw.mode = passThrough
		rw.ResponseWriter.WriteHeader(status)
		return
	}

	rw.mode = substituting
	rw.out.reset(rw.ResponseWriter)
	if !strings.EqualFold(mediaType, "text/event-stream") && !caddyhttp.IsIncremental(hdr) {
		rw.out.holdStart() // so that encode sees a first write worth compressing
	}
	if rw.stream == nil {
		rw.stream = rw.h.set.NewStream(&rw.out, rw.vars)
	} else {
		rw.stream.Reset(&rw.out, rw.vars)
	}
	rw.in.reset(rw.stream)
	rw.body = &rw.in
	if strong && rw.h.memo != nil {
		rw.useMemo(status, hdr, etag)
	}
	if rw.mode == copying {
		rw.body = &rw.out
	}
	if enc != identity {
		rw.dec = newDecoder(enc, rw.body, rw.h.logger)
		rw.body = rw.dec
	}
	rw.ResponseWriter.WriteHeader(status)
}

// notModified gives a 304 the validator the 200 would have carried (RFC
// 9110 §15.4.5): the weak form of a strong ETag when the 200 would have
// been substituted. A 304 seldom says its type: then the client's own
// If-None-Match tells, since it names the ETag its stored 200 carried. A
// client that holds the strong form (or names none) keeps the origin's.
func (rw *responseWriter) notModified(hdr http.Header, mediaType string, enc encoding) {
	etag := hdr.Get("Etag")
	if !isStrongETag(etag) || !rw.h.statusMatches(http.StatusOK) {
		return
	}
	weak := weakETag(etag, enc)
	if mediaType != "" {
		if !rw.h.typeMatches(mediaType) {
			return
		}
	} else if !listsETag(rw.req.Header["If-None-Match"], weak) {
		return
	}
	hdr.Set("Etag", weak)
}

// isStrongETag reports whether etag is a strong entity tag ("…").
func isStrongETag(etag string) bool {
	return len(etag) >= 2 && etag[0] == '"' && etag[len(etag)-1] == '"'
}

// codingSuffixes are what an origin's Caddy encode (and Apache's
// mod_deflate) append to a strong ETag for each coding.
var codingSuffixes = [...]string{encGzip: `-gzip"`, encDeflate: `-deflate"`, encBrotli: `-br"`, encZstd: `-zstd"`}

// weakETag is the ETag of a substituted body whose upstream sent the strong
// etag in coding enc: weak, since the bytes differ, and without the suffix
// naming the upstream's coding, which is not the coding the client gets.
// It then names the substituted representation whatever the upstream's
// coding, so a conditional request gets a 304 whichever coding either side
// picks.
func weakETag(etag string, enc encoding) string {
	if int(enc) < len(codingSuffixes) {
		if s := codingSuffixes[enc]; s != "" && len(etag) > len(s)+1 && strings.HasSuffix(etag, s) {
			etag = etag[:len(etag)-len(s)] + `"`
		}
	}
	return "W/" + etag
}

// listsETag reports whether one of the If-None-Match values lists tag,
// compared byte for byte.
func listsETag(values []string, tag string) bool {
	for _, v := range values {
		for v != "" {
			v = strings.TrimLeft(v, " \t,")
			i := 0
			if strings.HasPrefix(v, "W/") {
				i = 2
			}
			if i >= len(v) || v[i] != '"' {
				break // not an entity tag ("*" or garbage): nothing more to read
			}
			end := strings.IndexByte(v[i+1:], '"')
			if end < 0 {
				break
			}
			n := i + 1 + end + 1
			if v[:n] == tag {
				return true
			}
			v = v[n:]
		}
	}
	return false
}

// useMemo streams the body unscanned when the same bytes matched no rule
// before, for the same representation (see memo.representation).
func (rw *responseWriter) useMemo(status int, hdr http.Header, etag string) {
	key, ok := rw.h.memo.representation(rw.req, status, hdr)
	if !ok {
		metrics.memoIneligible.Inc()
		return
	}
	if rw.h.memo.unmatched(key, etag) {
		metrics.memoHits.Inc()
		rw.mode = copying
		return
	}
	metrics.memoMisses.Inc()
	rw.memoETag, rw.memoKey = etag, key
}

// Write routes p according to the decision taken at WriteHeader.
func (rw *responseWriter) Write(p []byte) (int, error) {
	if !rw.wroteHeader {
		rw.WriteHeader(http.StatusOK)
	}
	switch rw.mode {
	case passThrough:
		return rw.ResponseWriter.Write(p)
	case discarding:
		return len(p), nil
	}
	if rw.writeErr != nil {
		return 0, rw.writeErr
	}
	var start time.Time
	timed := rw.timed && rw.mode == substituting
	if timed {
		start = time.Now()
	}
	n, err := rw.body.Write(p)
	if timed {
		rw.timeScan(start)
	}
	if err != nil {
		rw.writeErr = err
	}
	return n, err
}

// writerOnly hides ReadFrom, so that io.Copy uses Write.
type writerOnly struct{ io.Writer }

// ReadFrom keeps sendfile for bodies that are not substituted (file_server
// and io.Copy reach the writer through here, not through Write).
func (rw *responseWriter) ReadFrom(r io.Reader) (int64, error) {
	if !rw.wroteHeader {
		rw.WriteHeader(http.StatusOK)
	}
	switch rw.mode {
	case passThrough:
		return rw.ResponseWriterWrapper.ReadFrom(r)
	case discarding:
		return io.Copy(io.Discard, r)
	}
	return copyPooled(writerOnly{rw}, r)
}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyPooled is io.Copy with a pooled buffer: the engine has no ReadFrom,
// and neither brotli's nor zlib's reader has WriteTo, so io.Copy would
// allocate its 32 KiB buffer for every response.
func copyPooled(dst io.Writer, src io.Reader) (int64, error) {
	bufp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bufp)
	return io.CopyBuffer(dst, src, *bufp)
}

// Flush implements http.Flusher.
func (rw *responseWriter) Flush() { _ = rw.FlushError() }

// FlushError sends everything that cannot be part of a match, and flushes
// the connection (reverse_proxy flushes SSE and streams this way).
func (rw *responseWriter) FlushError() error {
	if !rw.wroteHeader {
		rw.WriteHeader(http.StatusOK) // a flush sends the header: decide now
	}
	switch rw.mode {
	case discarding:
		return nil
	case substituting:
		if err := rw.feed(); err != nil {
			return err
		}
		fallthrough
	case copying:
		if rw.out.holding() {
			return nil // the start of the body waits (see output)
		}
		if err := rw.out.Flush(); err != nil {
			return err
		}
	}
	//nolint:bodyclose // not a client response
	return http.NewResponseController(rw.ResponseWriter).Flush()
}

// feed hands the engine what the input gathered (timed as the scan).
func (rw *responseWriter) feed() error {
	var start time.Time
	if rw.timed {
		start = time.Now()
	}
	err := rw.in.feed()
	if rw.timed {
		rw.timeScan(start)
	}
	if err != nil {
		return err
	}
	return rw.stream.Err()
}

// finish ends the body: the decoder and the engine write what they held.
// With abort set (the handler chain failed) nothing more is written.
func (rw *responseWriter) finish(abort bool) error {
	if rw.mode != substituting && rw.mode != copying {
		return nil
	}
	var err error
	if rw.dec != nil {
		err = rw.dec.Close(abort || rw.writeErr != nil)
		rw.dec = nil
		if isDecodeError(err) {
			return err // logged and counted by the decoder; nothing more is written
		}
	}
	if abort {
		return err
	}
	if rw.mode == substituting {
		if rw.timed {
			start := time.Now()
			defer func() {
				rw.timeScan(start)
				caddyhttp.SetVar(rw.req.Context(), serverTimingSubstitute, rw.scan)
			}()
		}
		if ferr := rw.in.feed(); err == nil {
			err = ferr
		}
		if cerr := rw.stream.Close(); err == nil {
			err = cerr
		}
	}
	if ferr := rw.out.end(); err == nil {
		err = ferr
	}
	if rw.mode != substituting {
		return err
	}
	if d := rw.stream.Dropped(); d > 0 {
		metrics.dropped.Add(float64(d))
	}
	if err == nil && rw.writeErr == nil && rw.memoETag != "" {
		if rw.stream.Matched().Empty() {
			rw.h.memo.store(rw.memoKey, rw.memoETag)
		} else {
			rw.h.memo.forget(rw.memoKey)
		}
	}
	return err
}

// timeScan adds the time since start to the scan's: the body's bytes going
// through the decoder and the engine to the output, which hands them on to
// the writers outside (a client slow to read shows here too).
func (rw *responseWriter) timeScan(start time.Time) {
	rw.scan += time.Since(start)
}

// mediaTypeOf returns the media type of a Content-Type value, without
// parameters or surrounding space.
func mediaTypeOf(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.TrimSpace(ct)
}

// bodyAllowed reports whether a response with this status has a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}
