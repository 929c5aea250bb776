package earlyhints

import (
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// writer sees the origin's 103s and its final header, by whichever path
// it comes: WriteHeader, the first Write, ReadFrom (file_server and
// io.Copy reach the writer there) or a flush (reverse_proxy flushes
// through http.ResponseController, which finds FlushError here).
type writer struct {
	caddyhttp.ResponseWriterWrapper
	h           *Handler
	r           *http.Request
	hinted      []string // the links this handler sent in its own 103
	early       []string // the Link values of the origin's 103s
	wroteHeader bool
}

// WriteHeader records the Link fields of an origin's 103 and passes it
// on: with the links this handler did not hint already alone when it has
// any (no duplicate hints), else unchanged, so that its other fields
// (Content-Security-Policy, Referrer-Policy) reach a client that reads a
// second 103 (Chromium reads only the first: the PoP's). On the final
// header it learns the page's links.
func (w *writer) WriteHeader(status int) {
	if w.wroteHeader {
		w.ResponseWriterWrapper.WriteHeader(status)
		return
	}
	hdr := w.Header()
	if status == http.StatusEarlyHints {
		values := hdr["Link"]
		if len(w.early) < maxPathLinks*4 {
			w.early = append(w.early, values...)
		}
		if !w.r.ProtoAtLeast(1, 1) {
			return // RFC 9110 §15.2: no 1xx to an HTTP/1.0 client
		}
		if len(w.hinted) > 0 {
			var fresh []string
			for _, l := range parseLinks(values) {
				if !contains(w.hinted, l.value) {
					fresh = append(fresh, l.value)
				}
			}
			if len(fresh) == 0 {
				w.ResponseWriterWrapper.WriteHeader(status)
				return
			}
			hdr["Link"] = fresh
			w.ResponseWriterWrapper.WriteHeader(status)
			hdr["Link"] = values
			return
		}
		w.ResponseWriterWrapper.WriteHeader(status)
		return
	}
	if status < 200 && status != http.StatusSwitchingProtocols {
		w.ResponseWriterWrapper.WriteHeader(status)
		return
	}
	w.wroteHeader = true
	// Decided after the header is passed on, not before: the writers of
	// the handlers outside this one (a header directive's deferred ops:
	// "header >Cache-Control private", "header >Vary Cookie", a deferred
	// Set-Cookie) share this header map and change it in their
	// WriteHeader, before it reaches the server. Once the call returns,
	// the map holds what the client receives, and a response made per-user
	// on its way out is not learned. (The server copies the map when it
	// writes the header; reading it afterwards is safe.)
	w.ResponseWriterWrapper.WriteHeader(status)
	if learnable(w.r, status, hdr) {
		w.h.learnFrom(w.r, append(w.early, hdr["Link"]...))
	}
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

// FlushError sends the header and what was written.
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
