package dictionary

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// What the writer does with the body of the current response.
type mode uint8

const (
	passThrough mode = iota // untouched (encode below may compress it)
	compressing             // through a dictionary encoder
	fromCache               // the delta cache had it: the body is discarded
	headOnly                // a HEAD with a delta's header: the body is discarded
)

// responseWriter decides at WriteHeader whether the response is marked
// (and its body captured for the store) and whether it is compressed
// against the planned dictionary, then routes every way a handler writes
// a body (Write, ReadFrom, Flush) accordingly.
type responseWriter struct {
	*caddyhttp.ResponseWriterWrapper
	h      *Handler
	req    *http.Request
	origin string
	path   string
	uri    string

	plan plan
	mark bool // the request's path matches h.Match: mark an eligible response
	// head is set for a HEAD request: it gets the header fields its GET
	// would get, decided from the header alone, and nothing is captured,
	// compressed or counted in the metrics. What only the GET's body or the
	// moment's load decides is left as for an unbounded GET: it is marked
	// whatever the capture budget, and announced as a delta whatever
	// max_encoders are in use; a delta's Content-Length is sent only when
	// the delta cache holds its bytes (else it is known only once
	// compressed, RFC 9110 §9.3.2).
	head bool

	wroteHeader      bool
	mode             mode
	notModifiedCoded bool // If-None-Match named the planned representation's ETag
	writeErr         error

	// compressing
	enc      deltaEncoder
	sent     countingWriter // what the encoder wrote, counted
	identity int64          // bytes given to the encoder
	deltaKey deltaKey
	delta    *capture // the compressed body, for the delta cache
	// While the response holds its encoder slot: restoreIdle puts back the
	// server's write idle settings, which the slot's override; own bounds
	// the encoder's output when the server applies none, under its write
	// timeout counted from start.
	start       time.Time
	restoreIdle func()
	own         *caddyhttp.IdleTimeoutWriter

	// marking
	body     *capture // the identity body, for the store
	reserved int64    // capture budget taken from the store
	res      resourceKey
}

// WriteHeader decides what happens to the body.
func (rw *responseWriter) WriteHeader(status int) {
	if rw.wroteHeader {
		return
	}
	if status >= 100 && status <= 199 && status != http.StatusSwitchingProtocols {
		rw.ResponseWriter.WriteHeader(status)
		return
	}
	rw.wroteHeader = true
	hdr := rw.Header()
	eligible := status == http.StatusOK && identityCoding(hdr) &&
		!hasToken(hdr["Cache-Control"], "no-transform") && len(hdr["Content-Range"]) == 0
	// A body known to be tiny is not worth the dictionary header.
	tiny := false
	if n, err := strconv.ParseInt(hdr.Get("Content-Length"), 10, 64); err == nil && n < minDictSize {
		tiny = true
	}

	if status == http.StatusNotModified {
		if rw.plan.dict != nil || rw.mark {
			addVary(hdr, "Accept-Encoding", "Available-Dictionary")
		}
		if rw.notModifiedCoded {
			if etag := hdr.Get("Etag"); isStrongETag(etag) {
				hdr.Set("Etag", codedETag(etag, rw.plan.coding, rw.plan.dict.key.hash))
			}
		}
		rw.ResponseWriter.WriteHeader(status)
		return
	}
	if eligible && (rw.plan.dict != nil || rw.mark) {
		// Another request (naming another dictionary, or none) would
		// get other bytes: caches must tell them apart.
		addVary(hdr, "Accept-Encoding", "Available-Dictionary")
	}
	readable := responseReadable(rw.req, hdr)
	if rw.mark && eligible && readable {
		rw.startMark(hdr)
	}
	if rw.plan.dict != nil {
		switch {
		case !eligible || tiny:
			rw.miss(missIneligible)
		case !readable:
			rw.miss(missCrossOrigin)
		default:
			reason := rw.startDelta(hdr, status)
			if reason == "" {
				return
			}
			rw.miss(reason)
		}
	}
	rw.ResponseWriter.WriteHeader(status)
}

// miss counts why a request naming a dictionary gets none (no reason: it
// gets one). A HEAD is not counted: it sends no body either way.
func (rw *responseWriter) miss(reason string) {
	if reason != "" && !rw.head {
		metrics.missBy[reason].Inc()
	}
}

// startMark marks the response as a dictionary and captures its body for
// the store, unless it must not become one (RFC 9842 security
// considerations: no-store, Set-Cookie; and what a shared cache must not
// store or would key per user: private, Vary: Cookie or *), is too large,
// or the capture budget is spent. The store is shared by every client: a
// per-user body in it would let anyone confirm a guess of that body by
// naming its hash.
func (rw *responseWriter) startMark(hdr http.Header) {
	if hasToken(hdr["Cache-Control"], "no-store") || hasToken(hdr["Cache-Control"], "private") ||
		len(hdr["Set-Cookie"]) > 0 || hasToken(hdr["Vary"], "Cookie") || hasToken(hdr["Vary"], "*") {
		return
	}
	limit := rw.h.MaxSize
	if cl := hdr.Get("Content-Length"); cl != "" {
		n, err := strconv.ParseInt(cl, 10, 64)
		if err != nil || n < minDictSize || n > rw.h.MaxSize {
			return
		}
		limit = n
	}
	if rw.head {
		hdr.Set("Use-As-Dictionary", useAsDictionary(rw.h.Match, rw.h.MatchDest, rw.h.ID))
		return // no body to capture
	}
	if etag := hdr.Get("Etag"); isStrongETag(etag) {
		rw.res = resourceKey{rw.origin, rw.path, etag}
		if rw.h.store.known(rw.res) {
			rw.setUseAsDictionary(hdr)
			return // stored already: mark without capturing again
		}
	}
	if !rw.h.store.reserve(limit) {
		return // other responses hold the budget: not marked, so never asked for
	}
	rw.reserved = limit
	rw.body = newCapture(limit)
	rw.setUseAsDictionary(hdr)
}

func (rw *responseWriter) setUseAsDictionary(hdr http.Header) {
	hdr.Set("Use-As-Dictionary", useAsDictionary(rw.h.Match, rw.h.MatchDest, rw.h.ID))
	metrics.marked.Inc()
}

// startDelta sends the header of a dictionary-compressed response and
// readies its body: from the delta cache, or through a pooled encoder. It
// returns the miss reason, having changed nothing, when no encoder can be
// had (all max_encoders in use, or preparing one failed).
func (rw *responseWriter) startDelta(hdr http.Header, status int) string {
	coding, d := rw.plan.coding, rw.plan.dict
	etag := hdr.Get("Etag")
	strong := isStrongETag(etag)
	// Only a response a shared cache could give to any client is looked up
	// or kept: the key does not hold what else the response varies on.
	cacheable := strong && rw.h.deltas != nil && sharedCacheable(rw.req, hdr)
	var cached []byte
	if cacheable {
		rw.deltaKey = deltaKey{rw.origin, rw.uri, d.key.hash, etag, coding}
		cached, _ = rw.h.deltas.get(rw.deltaKey)
	}
	if rw.head {
		rw.startHeadDelta(hdr, etag, strong, cached)
		rw.ResponseWriter.WriteHeader(status)
		return ""
	}
	if cached == nil {
		if !rw.h.takeEncoderSlot() {
			return missBusy
		}
		enc, err := d.encoders.acquire(coding)
		if err != nil {
			rw.h.releaseEncoderSlot()
			rw.h.logger.Error("preparing a dictionary encoder; sending the response without the dictionary",
				zap.String("coding", coding), zap.Error(err))
			return missIneligible
		}
		rw.enc = enc
		rw.boundSlotWrites()
	}
	rw.setDeltaHeader(hdr, etag, strong)
	metrics.hitBy[coding].Inc()
	if cached != nil {
		metrics.deltaHits.Inc()
		rw.mode = fromCache
		hdr.Set("Content-Length", strconv.Itoa(len(cached)))
		rw.ResponseWriter.WriteHeader(status)
		_, rw.writeErr = rw.ResponseWriter.Write(cached)
		rw.sent.n = int64(len(cached))
		return ""
	}
	if cacheable {
		// A delta worth caching is small; a larger one is sent without
		// being kept, so that concurrent responses hold little each.
		rw.delta = newCapture(min(maxCachedDelta, rw.h.DeltaCacheSize/16))
	}
	rw.ResponseWriter.WriteHeader(status)
	rw.mode = compressing
	rw.sent = countingWriter{w: rw.ResponseWriter, tee: rw.delta}
	if rw.own != nil {
		rw.sent.w = rw.own
	}
	if rw.writeErr = d.encoders.start(coding, rw.enc, &rw.sent); rw.writeErr != nil {
		rw.dropEncoder()
	}
	return ""
}

// boundSlotWrites bounds, while the response holds its encoder slot, how
// long its writes may stall (EncoderWriteIdle) and how slowly its client may
// read (EncoderMinRate): a client that stops reading would otherwise hold
// the slot, and the prepared encoder of several MiB, for as long as the
// server's own write_idle timeout allows (1 minute per write by default,
// forever when it is off or the client reads a little now and then), and
// max_encoders such clients would stop deltas for everyone. Caddy's
// server applies its write idle timeout with a writer below every handler,
// which sets the deadline last: the slot's bounds override its settings
// where they are tighter (Caddy's way for a handler with idle timeouts of
// its own), and releasing the slot puts them back. When the server applies none, the encoder's output gets
// such a writer of its own, under the server's write timeout if any.
func (rw *responseWriter) boundSlotWrites() {
	timeout, minRate := time.Duration(rw.h.EncoderWriteIdle), rw.h.EncoderMinRate
	if _, iw := caddyhttp.IdleTimeoutsFromContext(rw.req.Context()); iw != nil {
		// Only ever tighter than the server's own settings.
		rw.restoreIdle = iw.Override(min(timeout, iw.Deadline.Timeout), max(minRate, iw.Deadline.MinRate), 0)
		return
	}
	var hard time.Time
	if srv, ok := rw.req.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv.WriteTimeout > 0 {
		hard = rw.start.Add(time.Duration(srv.WriteTimeout))
	}
	rw.own = &caddyhttp.IdleTimeoutWriter{
		ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: rw.ResponseWriter},
		//nolint:bodyclose // not a client response
		Ctrl:     http.NewResponseController(rw.ResponseWriter),
		Deadline: caddyhttp.IdleDeadline{Start: time.Now(), Timeout: timeout, MinRate: minRate, HardDeadline: hard},
		Logger:   rw.h.logger,
		// Cleared after each write on every protocol: the deadline must
		// not outlive the slot.
		ClearBetweenWrites: true,
	}
}

// releaseSlot gives back the encoder slot and the server's write idle
// settings.
func (rw *responseWriter) releaseSlot() {
	if rw.restoreIdle != nil {
		rw.restoreIdle()
		rw.restoreIdle = nil
	}
	rw.own = nil
	rw.h.releaseEncoderSlot()
}

// dropEncoder gives back the encoder slot of a response whose write to the
// client failed (past encoder_write_idle, or the client went away) at once,
// not when the handlers below stop writing. The encoder, stopped
// mid-stream, is dropped rather than pooled.
func (rw *responseWriter) dropEncoder() {
	if rw.enc != nil {
		rw.enc = nil
		rw.releaseSlot()
	}
}

// setDeltaHeader turns the header of the identity response, with etag
// (strong or not), into the header of its delta in the planned coding.
func (rw *responseWriter) setDeltaHeader(hdr http.Header, etag string, strong bool) {
	hdr.Del("Content-Length")
	hdr.Del("Accept-Ranges")
	hdr.Set("Content-Encoding", rw.plan.coding)
	if strong {
		hdr.Set("Etag", codedETag(etag, rw.plan.coding, rw.plan.dict.key.hash))
	} else {
		hdr.Del("Etag") // a weak ETag may stand for other bytes, and so another delta
	}
}

// startHeadDelta gives a HEAD the header of the delta its GET would get,
// with the Content-Length of the cached delta if there is one, and
// discards what the handlers below write as the body: net/http would
// otherwise announce the identity body's length.
func (rw *responseWriter) startHeadDelta(hdr http.Header, etag string, strong bool, cached []byte) {
	rw.setDeltaHeader(hdr, etag, strong)
	if cached != nil {
		hdr.Set("Content-Length", strconv.Itoa(len(cached)))
	}
	rw.mode = headOnly
}

// Write routes p according to the decision taken at WriteHeader.
func (rw *responseWriter) Write(p []byte) (int, error) {
	if !rw.wroteHeader {
		rw.WriteHeader(http.StatusOK)
	}
	if rw.body != nil {
		rw.body.Write(p)
		if rw.body.overflow {
			// Past max_size: nothing will be stored, so the budget goes
			// back now, not when a long or slowly read body ends.
			rw.body = nil
			rw.h.store.release(rw.reserved)
			rw.reserved = 0
		}
	}
	switch rw.mode {
	case compressing:
		if rw.writeErr != nil {
			return 0, rw.writeErr
		}
		n, err := rw.enc.Write(p)
		rw.identity += int64(n)
		if err != nil {
			rw.writeErr = err
			rw.dropEncoder()
		}
		return n, err
	case fromCache:
		rw.identity += int64(len(p))
		return len(p), nil
	case headOnly:
		return len(p), nil
	}
	return rw.ResponseWriter.Write(p)
}

// writerOnly hides ReadFrom, so that io.Copy uses Write.
type writerOnly struct{ io.Writer }

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ReadFrom keeps sendfile for bodies that are neither compressed nor
// captured (file_server reaches the writer through here).
func (rw *responseWriter) ReadFrom(r io.Reader) (int64, error) {
	if !rw.wroteHeader {
		rw.WriteHeader(http.StatusOK)
	}
	if rw.mode == passThrough && rw.body == nil {
		return rw.ResponseWriterWrapper.ReadFrom(r)
	}
	bufp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bufp)
	return io.CopyBuffer(writerOnly{rw}, r, *bufp)
}

// Flush implements http.Flusher.
func (rw *responseWriter) Flush() { _ = rw.FlushError() }

// FlushError sends what the encoder holds, and flushes the connection.
func (rw *responseWriter) FlushError() error {
	if !rw.wroteHeader {
		rw.WriteHeader(http.StatusOK)
	}
	if rw.mode == compressing && rw.writeErr == nil {
		if err := rw.enc.Flush(); err != nil {
			rw.writeErr = err
			rw.dropEncoder()
			return err
		}
	}
	var w http.ResponseWriter = rw.ResponseWriter
	if rw.own != nil {
		w = rw.own // bounded as the writes are
	}
	//nolint:bodyclose // not a client response
	return http.NewResponseController(w).Flush()
}

// finish ends the body, and stores what the response taught: its body
// as a dictionary, its compressed body in the delta cache. With abort set
// (the handler chain failed) nothing more is written or stored.
func (rw *responseWriter) finish(abort bool) error {
	var err error
	if rw.mode == compressing && rw.enc != nil {
		if !abort && rw.writeErr == nil {
			err = rw.enc.Close()
		}
		rw.plan.dict.encoders.put(rw.plan.coding, rw.enc)
		rw.enc = nil
		rw.releaseSlot()
	}
	complete := !abort && err == nil && rw.writeErr == nil
	if (rw.mode == compressing || rw.mode == fromCache) && complete {
		// A body of a few bytes comes out larger (the 36- or 40-byte
		// header alone); a counter cannot go down, so only savings count.
		if saved := rw.identity - rw.sent.n; saved > 0 {
			metrics.bytesSaved.Add(float64(saved))
		}
		if rw.delta != nil && !rw.delta.overflow {
			b := rw.delta.bytes()
			rw.h.deltas.add(rw.deltaKey, b, int64(len(b))+deltaOverhead(rw.deltaKey))
		}
	}
	if rw.body != nil {
		if complete && !rw.body.overflow {
			rw.h.store.add(rw.origin, rw.body.bytes(), rw.h.match, rw.h.MatchDest, rw.res, rw.h.enc)
		}
		rw.body = nil
	}
	if rw.reserved > 0 {
		rw.h.store.release(rw.reserved)
		rw.reserved = 0
	}
	return err
}

// releaseHeld gives back what finish did not: the encoder slot and the
// capture budget of a response cut short by a panic below. The encoder,
// stopped mid-stream, is dropped rather than pooled.
func (rw *responseWriter) releaseHeld() {
	rw.dropEncoder()
	rw.body = nil
	if rw.reserved > 0 {
		rw.h.store.release(rw.reserved)
		rw.reserved = 0
	}
}

// maxCachedDelta is the largest dictionary-compressed body the delta cache
// keeps.
const maxCachedDelta = 256 << 10

// deltaOverhead is what the delta cache counts per entry beyond its bytes.
func deltaOverhead(k deltaKey) int64 {
	return int64(len(k.origin)+len(k.uri)+len(k.etag)) + 256
}

// capture keeps a copy of a body up to a limit; past it, it keeps nothing.
type capture struct {
	buf      bytes.Buffer
	limit    int64
	overflow bool
}

func newCapture(limit int64) *capture { return &capture{limit: limit} }

func (c *capture) Write(p []byte) {
	if c.overflow {
		return
	}
	if int64(c.buf.Len())+int64(len(p)) > c.limit {
		c.overflow = true
		c.buf = bytes.Buffer{} // drop it now, not when the response ends
		return
	}
	c.buf.Write(p)
}

// bytes returns what was captured, in a slice no larger than needed, so
// that the bytes the caches count are the bytes they hold.
func (c *capture) bytes() []byte {
	b := c.buf.Bytes()
	if cap(b)-len(b) > len(b)/16 {
		b = bytes.Clone(b)
	}
	return b
}

// countingWriter counts what reaches w, and copies it into tee.
type countingWriter struct {
	w   io.Writer
	tee *capture
	n   int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if c.tee != nil {
		c.tee.Write(p[:n])
	}
	return n, err
}

// identityCoding reports whether a response header names no content coding
// (or identity): only such bodies are stored or compressed.
func identityCoding(h http.Header) bool {
	for _, v := range h["Content-Encoding"] {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}

// isStrongETag reports whether etag is a strong entity tag ("…").
func isStrongETag(etag string) bool {
	return len(etag) >= 2 && etag[0] == '"' && etag[len(etag)-1] == '"'
}

// codedETag is the strong ETag of the form of the response with etag
// compressed in coding against the dictionary with the given hash:
// distinct per coding and per dictionary (RFC 9110 §8.8.3.3: other
// bytes), as encode does with its own codings.
func codedETag(etag, coding string, dict [hashSize]byte) string {
	return etag[:len(etag)-1] + etagSuffix(coding, dict) + `"`
}

// etagSuffix is what codedETag inserts before the closing quote: the
// coding and the first 48 bits of the dictionary's hash, enough to tell
// apart the dictionaries one resource is compressed against.
func etagSuffix(coding string, dict [hashSize]byte) string {
	return "-" + coding + "-" + hex.EncodeToString(dict[:6])
}
