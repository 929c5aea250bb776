package servertiming

import (
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// writer adds the entries when the final header is written, by whichever
// path: WriteHeader, the first Write, ReadFrom (file_server and io.Copy
// reach the writer there, not through Write) or a flush (reverse_proxy
// flushes streams through http.ResponseController, which finds FlushError
// here before it unwraps).
type writer struct {
	caddyhttp.ResponseWriterWrapper
	t           *timing
	wroteHeader bool
	trailer     bool
	// h1Header is, on HTTP/1.1 with a declared Server-Timing trailer, the
	// number of Server-Timing values the header went out with.
	h1Header int
	// split says the header's entries went under streamedKey, leaving
	// Server-Timing to the trailer.
	split bool
}

// WriteHeader adds the entries to a final header. A 1xx (103 Early Hints
// from the upstream) gets none: the times are not known yet, and the final
// header follows. reverse_proxy copies an upstream's 1xx fields into the
// map for it, so they are filtered as the final header's are: no
// Timing-Allow-Origin (the operator's choice, set on the final header) and
// no PoP-named or malformed Server-Timing entry.
func (w *writer) WriteHeader(status int) {
	if !w.wroteHeader && (status >= 200 || status == http.StatusSwitchingProtocols) {
		w.wroteHeader = true
		w.t.writeHeaderFields(w.Header(), status, true)
	} else if !w.wroteHeader && status >= 100 && status < 200 {
		hdr := w.Header()
		dropOwnNamesIn(hdr, fieldServerTiming)
		dropOwnNamesIn(hdr, streamedKey)
		delete(hdr, fieldTAO)
		for _, k := range taoSpellings {
			delete(hdr, k)
		}
	}
	w.ResponseWriterWrapper.WriteHeader(status)
}

func (w *writer) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriterWrapper.Write(p)
}

// ReadFrom keeps sendfile (the wrapper's ReadFrom uses the server's).
func (w *writer) ReadFrom(r io.Reader) (int64, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriterWrapper.ReadFrom(r)
}

// Flush implements http.Flusher.
func (w *writer) Flush() { _ = w.FlushError() }

// FlushError sends the header (with the entries) and what was written.
func (w *writer) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	//nolint:bodyclose // not a client response
	return http.NewResponseController(w.ResponseWriter).Flush()
}

var (
	_ http.Flusher  = (*writer)(nil)
	_ io.ReaderFrom = (*writer)(nil)
)
