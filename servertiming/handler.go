package servertiming

import (
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// timing is one request's measurements and response writer. Pooled: a
// timing whose upstream trace fired is not put back (the transport may
// still call its hooks).
type timing struct {
	trace httptrace.ClientTrace // bound to this timing, made once
	up    upstream              // zero again when the timing is put back
	w     writer
	buf   [maxHeaderLen]byte // the entries are built here
	timed
}

// timed is what one request sets; reset zeroes it alone (the trace and the
// buffer need no zeroing, and copying them costs write barriers).
type timed struct {
	start time.Time
	h     *Handler
	r     *http.Request
	slot  *fieldSlot     // room for the header values in r's allocation, or nil
	vars  map[string]any // the request's Caddy variables

	// Set when the header is written.
	headerAt int64 // nanoseconds since start, plus one
	status   int
	ut       upstreamTimes
	edge     time.Duration
	rtt      time.Duration
	hasRTT   bool
	throttle time.Duration
	hasThr   bool
	desc     string // the client entry's
	// tao holds the response's Timing-Allow-Origin value (the map's),
	// made with the header's entries; nil when none is configured. (A
	// pointer: timing must stay within its size class.)
	tao *[1]string
}

var timings = sync.Pool{New: func() any {
	t := new(timing)
	t.trace = t.hooks()
	return t
}}

// reset readies t for the pool; only a timing whose trace never fired is
// put back, so its upstream is still zero.
func (t *timing) reset() {
	t.timed = timed{}
	t.w = writer{}
}

// ServeHTTP times the request and adds the entries to its response.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	// One context lookup for the variables: each walks the whole chain.
	vars, _ := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
	if on, _ := vars[VarOn].(bool); on {
		// A server_timing outside this one times the request already: a
		// second set of entries (and its Timing-Allow-Origin) would only
		// contradict the first.
		return next.ServeHTTP(w, r)
	}
	t := timings.Get().(*timing)
	t.vars = vars
	// The clock starts when Caddy's server began the request (the start
	// of the access log's duration too), not when the route reached here.
	var ok bool
	if t.start, ok = t.vars[caddyStartTime].(time.Time); !ok {
		t.start = time.Now()
	}
	if t.vars != nil {
		t.vars[VarOn] = true
	}
	t.h = h
	t.w = writer{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, t: t}
	r, t.slot = withTrace(r, &t.trace)
	t.r = r

	err := next.ServeHTTP(&t.w, r)
	untimedError := err != nil && !t.w.wroteHeader
	if untimedError {
		// An error returned before anything was written: its response is
		// written after this handler returned, by whatever handles the
		// error (the server's error routes, a subroute's, Caddy's bare
		// status), on a writer this handler does not wrap. What those
		// handlers add (a reverse_proxy's Timing-Allow-Origin: *, entries
		// named as the PoP's, a 1xx, a trailer) would sit beside the
		// PoP's entries past every filter here, and nothing tells this
		// handler which of them runs. So the response is not timed here;
		// the mark is cleared, so that a server_timing among the error's
		// handlers (in handle_errors) times it, from the request's start.
		if t.vars != nil {
			delete(t.vars, VarOn)
		}
	} else if !t.w.wroteHeader {
		// Nothing written, no error: net/http writes the header after
		// this returns, from this map, and the body is empty: no trailer.
		// Nothing can change the map between these fields and the
		// header.
		t.writeHeaderFields(w.Header(), http.StatusOK, false)
	} else {
		// An upstream's Timing-Allow-Origin trailer, which reverse_proxy
		// adds to the map after the body, under the name or the
		// TrailerPrefix one.
		t.setTAO(w.Header())
	}
	total := time.Since(t.start)
	if t.w.wroteHeader {
		// The upstream's trailer, as reverse_proxy added it: undeclared,
		// or declared where the header's entries went under streamedKey.
		hdr := w.Header()
		dropOwnNamesIn(hdr, trailerKey)
		if t.w.split {
			dropOwnNamesIn(hdr, fieldServerTiming)
		}
	}
	if n := t.w.h1Header; n > 0 {
		// An upstream's declared trailer over HTTP/1.1: reverse_proxy added
		// its values after the header's, which net/http would repeat in
		// the trailer. The trailer is the upstream's alone (no PoP trailer
		// on HTTP/1.1).
		hdr := w.Header()
		if v := dropOwnNames(hdr[fieldServerTiming][min(n, len(hdr[fieldServerTiming])):]); len(v) > 0 {
			hdr[fieldServerTiming] = v
		} else {
			delete(hdr, fieldServerTiming)
		}
	}
	var ce *zapcore.CheckedEntry
	if !untimedError { // nothing measured: the error's response is not this handler's
		ce = h.logger.Check(zapcore.DebugLevel, "server timing")
	}
	var sub time.Duration
	var hasSub bool
	if t.w.trailer || ce != nil {
		sub, hasSub = t.durVar(VarSubstitute)
	}
	if t.w.trailer {
		b := appendDur(t.buf[:0], nameTotal, total)
		if hasSub {
			b = appendDur(b, nameSubstitute, sub)
		}
		// Declared in the header (Trailer): net/http's HTTP/2 and
		// quic-go's HTTP/3 send the declared field as a trailer. An
		// upstream's own trailer stays: reverse_proxy adds it under the
		// declared name (left empty when the header went out) or, when
		// the upstream had not declared it, under the TrailerPrefix key,
		// which net/http would promote over the declared one and quic-go
		// take or not depending on map order; so both keys get it all.
		hdr := w.Header()
		prefixed, hasPrefixed := hdr[trailerKey]
		var vals []string
		if prev := hdr[fieldServerTiming]; len(prev)+len(prefixed) == 0 {
			vals = newFieldValues(t.slot, b, "").st
		} else {
			vals = make([]string, 0, len(prev)+len(prefixed)+1)
			vals = append(append(append(vals, prev...), prefixed...), string(b))
		}
		hdr[fieldServerTiming] = vals
		if hasPrefixed {
			hdr[trailerKey] = vals
		}
	}
	if ce != nil {
		t.log(ce, total, sub, hasSub)
	}
	if !t.up.used.Load() {
		t.reset()
		timings.Put(t)
	}
	return err
}

// caddyStartTime is the variable in which Caddy's server keeps the time it
// began the request.
const caddyStartTime = "start_time"

// fieldServerTiming is the header's canonical name; streamedKey the name
// its header entries are kept under in a response that also sends it as a
// trailer (see writeHeaderFields).
const (
	fieldServerTiming = "Server-Timing"
	streamedKey       = "server-timing"
	trailerKey        = http.TrailerPrefix + fieldServerTiming
	fieldTAO          = "Timing-Allow-Origin"
)

// writeHeaderFields measures what is known when the final header is
// written and adds the entries (and Timing-Allow-Origin) to hdr; with
// trailer set, a streamed response also gets the trailer.
func (t *timing) writeHeaderFields(hdr http.Header, status int, trailer bool) {
	at := int64(time.Since(t.start)) + 1
	t.headerAt, t.status = at, status
	t.ut = t.up.read(at, trailer)
	t.edge = time.Duration(at-1) - t.ut.wait
	t.rtt, t.hasRTT = clientRTT(t.r, t.w.ResponseWriter, t.start.Sub(epoch)+time.Duration(at-1))
	t.throttle, t.hasThr = t.durVar(VarThrottle)

	b := appendDur(t.buf[:0], nameEdge, t.edge)
	if t.ut.ok {
		b = appendDur(b, nameOrigin, t.ut.origin)
		if t.ut.reused {
			b = appendDesc(b, nameOriginConn, "reused")
		} else {
			b = appendDesc(b, nameOriginConn, "new")
			if t.ut.hasDial {
				b = appendDur(b, nameOriginDial, t.ut.dial)
			}
			if t.ut.hasTLS {
				b = appendDur(b, nameOriginTLS, t.ut.tls)
			}
		}
	}
	t.desc = clientDesc(t.r, t.w.ResponseWriter)
	b = appendDesc(b, nameClient, t.desc)
	if t.hasRTT {
		b = appendDur(b, nameRTT, t.rtt)
	}
	if t.hasThr {
		b = appendDur(b, nameThrottle, t.throttle)
	}
	fv := newFieldValues(t.slot, b, t.h.tao)
	t.tao = fv.tao
	// The upstream's entries named as the PoP's would come first, and a
	// RUM script reads the first of a name.
	dropOwnNamesIn(hdr, fieldServerTiming)
	dropOwnNamesIn(hdr, streamedKey)

	key := fieldServerTiming
	streamed := trailer && t.streamed(hdr, status)
	// The Trailer field is looked up once: only this function adds to it
	// (Server-Timing), and only where it was not declared.
	trailerVals, hasTrailer := hdr["Trailer"]
	declared := declaresTrailer(trailerVals)
	if streamed || (t.r.ProtoMajor >= 2 && declared) {
		// The totals follow as a trailer, declared here (or the upstream
		// declared its own). quic-go leaves a declared field out of the
		// header block, so the header's entries (and any the upstream
		// sent) go under the lowercase name, which HTTP/2 and HTTP/3 send
		// lowercase anyway, and the canonical name is left for the
		// trailer.
		key = streamedKey
		t.w.split = true
		if prev, ok := hdr[fieldServerTiming]; ok {
			hdr[streamedKey] = append(hdr[streamedKey], prev...)
			delete(hdr, fieldServerTiming)
		}
	}
	// An upstream's Trailer, if any, loses Timing-Allow-Origin before the
	// PoP's Server-Timing may join it.
	if hasTrailer {
		undeclareTAO(hdr, trailerVals)
	}
	if streamed {
		t.w.trailer = true
		if !declared {
			hdr["Trailer"] = append(hdr["Trailer"], fieldServerTiming)
		}
	}
	// The PoP's value first: a parser that reads the upstream's entries
	// otherwise than this filter still meets the PoP's before them.
	if prev := hdr[key]; len(prev) == 0 {
		hdr[key] = fv.st
	} else {
		vals := make([]string, 0, len(prev)+1) // never into an upstream's array
		hdr[key] = append(append(vals, fv.st[0]), prev...)
	}
	if trailer && t.r.ProtoMajor < 2 && declared {
		// HTTP/1.1 sends the declared field's values in the map after the
		// body as the trailer: the header's are there too (see ServeHTTP).
		t.w.h1Header = len(hdr[key])
	}
	// Who may read the entries is the operator's choice: an upstream's
	// Timing-Allow-Origin (a `*`, or the request's Origin reflected) would
	// open them to any page, in the header or as a trailer.
	t.setTAO(hdr)
}

// taoSpellings are the other keys a Timing-Allow-Origin can be under:
// reverse_proxy adds an upstream's trailer canonical, or under
// http.TrailerPrefix; the lowercase ones are HTTP/2's and HTTP/3's
// spelling. Looked up one by one: ranging over the map costs more.
var taoSpellings = [...]string{http.TrailerPrefix + fieldTAO, "timing-allow-origin", http.TrailerPrefix + "timing-allow-origin"}

// setTAO makes the configured Timing-Allow-Origin the only one in hdr,
// the trailer keys included (an upstream's trailer), or removes them all
// when none is configured.
func (t *timing) setTAO(hdr http.Header) {
	for _, k := range taoSpellings {
		delete(hdr, k)
	}
	if t.h.tao == "" {
		delete(hdr, fieldTAO)
		return
	}
	if t.tao == nil {
		t.tao = new([1]string)
	}
	// The response's own value (its slice capped: an append went
	// elsewhere), set again in case a handler wrote into it.
	t.tao[0] = t.h.tao
	hdr[fieldTAO] = t.tao[:]
}

// undeclareTAO removes Timing-Allow-Origin from hdr's Trailer field: an
// upstream that declares it would send its own value after the body (and
// quic-go would leave the configured one out of the header).
// vals is hdr's Trailer field.
func undeclareTAO(hdr http.Header, vals []string) {
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		var names []string
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" && !strings.EqualFold(name, fieldTAO) {
				names = append(names, name)
			}
		}
		if len(names) > 0 {
			out = append(out, strings.Join(names, ", "))
		}
	}
	if len(out) == 0 {
		delete(hdr, "Trailer")
	} else {
		hdr["Trailer"] = out
	}
}

// streamed says the response's totals go in a trailer: a body of unknown
// length over HTTP/2 or HTTP/3, which carry trailers after any body.
// (HTTP/1.1 could, chunked, but browsers and most clients drop them.)
func (t *timing) streamed(hdr http.Header, status int) bool {
	if t.r.ProtoMajor < 2 || t.r.Method == http.MethodHead || !bodyAllowed(status) {
		return false
	}
	_, hasLen := hdr["Content-Length"]
	return !hasLen
}

// declaresTrailer says a Trailer field (its values) names Server-Timing.
func declaresTrailer(trailer []string) bool {
	for _, v := range trailer {
		for name := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(name), fieldServerTiming) {
				return true
			}
		}
	}
	return false
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// durVar returns the time.Duration another module left in the Caddy
// variable name.
func (t *timing) durVar(name string) (time.Duration, bool) {
	d, ok := t.vars[name].(time.Duration)
	return d, ok
}

// log writes the measurements (not the header) at debug level, each
// duration in nanoseconds (the entries send them in milliseconds, to the
// microsecond): what the integration test compares the browser's entries
// with.
func (t *timing) log(ce *zapcore.CheckedEntry, total, sub time.Duration, hasSub bool) {
	desc := t.desc
	fields := make([]zap.Field, 0, 14)
	fields = append(fields, zap.String("host", t.r.Host), zap.String("path", t.r.URL.Path), zap.Int("status", t.status),
		zap.String("client", desc[1:len(desc)-1]), zap.Int64("edge_ns", int64(t.edge)), zap.Int64("total_ns", int64(total)))
	if t.ut.ok {
		fields = append(fields, zap.Int64("origin_ns", int64(t.ut.origin)), zap.Bool("origin_reused", t.ut.reused))
		if t.ut.hasDial {
			fields = append(fields, zap.Int64("origin_dial_ns", int64(t.ut.dial)))
		}
		if t.ut.hasTLS {
			fields = append(fields, zap.Int64("origin_tls_ns", int64(t.ut.tls)))
		}
	}
	if t.hasRTT {
		fields = append(fields, zap.Int64("rtt_ns", int64(t.rtt)))
	}
	if t.hasThr {
		fields = append(fields, zap.Int64("throttle_ns", int64(t.throttle)))
	}
	if hasSub {
		fields = append(fields, zap.Int64("substitute_ns", int64(sub)))
	}
	fields = append(fields, zap.Bool("trailer", t.w.trailer))
	ce.Write(fields...)
}
