package substitute

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// outcome is what a client of substitute would see of one response.
type outcome struct {
	body        []byte
	writeFailed bool // a write into substitute failed: reverse_proxy aborts on that
	aborted     bool // ServeHTTP panicked with http.ErrAbortHandler
}

// clientSees is whether the client can tell the body is broken.
func (o outcome) clientSees() string {
	if o.aborted || o.writeFailed {
		return "aborted"
	}
	return "complete"
}

// serveChunks runs h in front of an origin that sends body in the given
// chunks, and reports what happened. Any panic other than
// http.ErrAbortHandler fails the test.
func serveChunks(t *testing.T, h *Handler, hdr map[string]string, chunks [][]byte) (o outcome) {
	t.Helper()
	rec := httptest.NewRecorder()
	next := asCaddy(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.WriteHeader(200)
		for _, c := range chunks {
			if _, err := w.Write(c); err != nil {
				o.writeFailed = true
			}
		}
	})
	func() {
		defer func() {
			if v := recover(); v != nil {
				if v != http.ErrAbortHandler {
					t.Fatalf("ServeHTTP panicked with %v, want http.ErrAbortHandler", v)
				}
				o.aborted = true
			}
		}()
		if err := h.ServeHTTP(rec, request("GET", "/"), next); err != nil {
			t.Fatalf("ServeHTTP: %v", err)
		}
	}()
	o.body = rec.Body.Bytes()
	return o
}

// codings are the upstream codings substitute decodes, with the
// Content-Encoding each is sent under.
var codings = []struct{ name, header string }{
	{"gzip", "gzip"}, {"deflate", "deflate"}, {"raw-deflate", "deflate"}, {"br", "br"}, {"zstd", "zstd"},
}

// varied is text that does not compress to almost nothing, so that half
// of its compressed form is half of a real stream.
func varied(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %d: see https://origin.example/id-%d, %x\n", i, i*7919%1000, i*i*2654435761)
	}
	return b.Bytes()[:n]
}

func TestTruncatedEncodingAborts(t *testing.T) {
	h := basicHandler(t)
	plain := varied(200 << 10)
	for _, enc := range codings {
		full := compress(t, enc.name, plain)
		hdr := map[string]string{"Content-Type": "text/html", "Content-Encoding": enc.header}
		for _, cut := range []int{1, 2, len(full) / 2, len(full) - 1} {
			for _, chunk := range []int{1000, len(full)} {
				chunks := chunked(full[:cut], chunk)
				before := testutil.ToFloat64(metrics.decodeFailures)
				o := serveChunks(t, h, hdr, chunks)
				if !o.aborted {
					t.Errorf("%s cut at %d/%d, chunks of %d: ServeHTTP ended normally with %d of %d bytes (write failed: %v), want an abort (http.ErrAbortHandler)",
						enc.name, cut, len(full), chunk, len(o.body), len(plain), o.writeFailed)
				}
				if got := testutil.ToFloat64(metrics.decodeFailures); got != before+1 {
					t.Errorf("%s cut at %d: decode_errors_total went from %v to %v, want +1", enc.name, cut, before, got)
				}
			}
		}
	}
}

func TestEmptyEncodedBodyIsEmpty(t *testing.T) {
	// No byte at all under a Content-Encoding: clients take it for an
	// empty body, and so does substitute (not a truncated stream).
	h := basicHandler(t)
	for _, enc := range codings {
		o := serveChunks(t, h, map[string]string{"Content-Type": "text/html", "Content-Encoding": enc.header}, nil)
		if o.clientSees() != "complete" || len(o.body) != 0 {
			t.Errorf("%s: empty body gave %q, %s; want an empty complete body", enc.name, o.body, o.clientSees())
		}
	}
}

func TestConcatenatedStreamsAreNotTrailingBytes(t *testing.T) {
	// gzip members and zstd frames may follow one another (RFC 1952,
	// RFC 8878): the body is all of them.
	h := basicHandler(t)
	a, b := []byte("first origin.example "), []byte("second id-9")
	for _, enc := range []string{"gzip", "zstd"} {
		body := append(compress(t, enc, a), compress(t, enc, b)...)
		for i := 0; i <= len(body); i++ {
			o := serveChunks(t, h, map[string]string{"Content-Type": "text/html", "Content-Encoding": enc}, split(body, i))
			if o.clientSees() != "complete" || string(o.body) != "first edge.example second n9" {
				t.Fatalf("%s split at %d: %q, %s", enc, i, o.body, o.clientSees())
			}
		}
	}
}

// split cuts b in two at i, leaving out an empty part.
func split(b []byte, i int) [][]byte {
	var chunks [][]byte
	if i > 0 {
		chunks = append(chunks, b[:i])
	}
	if i < len(b) {
		chunks = append(chunks, b[i:])
	}
	return chunks
}

func TestTrailingBytesAbortWhateverTheChunks(t *testing.T) {
	// Bytes after the end of a complete stream make a body that is not
	// what its Content-Encoding says: the response aborts, wherever the
	// upstream's writes happen to cut the body.
	h := basicHandler(t)
	plain := []byte("a page from origin.example, id-1, that ends here\n")
	for _, enc := range codings {
		for _, tail := range []string{"\n", "abcd", strings.Repeat("trailing garbage ", 10)} {
			body := append(compress(t, enc.name, plain), tail...)
			hdr := map[string]string{"Content-Type": "text/html", "Content-Encoding": enc.header}
			results := map[string][]int{}
			for i := 0; i <= len(body); i++ {
				o := serveChunks(t, h, hdr, split(body, i))
				results[o.clientSees()] = append(results[o.clientSees()], i)
			}
			ones := make([][]byte, len(body))
			for i := range body {
				ones[i] = body[i : i+1]
			}
			o := serveChunks(t, h, hdr, ones)
			results[o.clientSees()] = append(results[o.clientSees()], -1) // -1: one byte per write
			if len(results) != 1 || results["aborted"] == nil {
				t.Errorf("%s + %q: outcome by split point %v; want aborted at every split point", enc.name, tail, results)
			}
		}
	}
}

func TestPanicInDecoderEndsOnlyItsResponse(t *testing.T) {
	// Without a recover in the decoding goroutine this test does not
	// fail: the test binary dies.
	h := basicHandler(t)
	core, logs := observer.New(zapcore.DebugLevel)
	h.logger = zap.New(core)
	plain := varied(400 << 10) // several decoded writes for every coding
	for _, enc := range codings {
		for _, at := range []int{1, 3} { // the first decoded write (mid-body), or a later one
			calls := 0
			testHookDecoded = func([]byte) {
				if calls++; calls == at {
					panic("injected decoder panic")
				}
			}
			before := testutil.ToFloat64(metrics.panics)
			beforeDecode := testutil.ToFloat64(metrics.decodeFailures)
			o := serveChunks(t, h, map[string]string{"Content-Type": "text/html", "Content-Encoding": enc.header}, [][]byte{compress(t, enc.name, plain)})
			testHookDecoded = nil
			if !o.aborted {
				t.Errorf("%s, panic at decoded write %d: response not aborted (%d bytes, write failed: %v)", enc.name, at, len(o.body), o.writeFailed)
			}
			if got := testutil.ToFloat64(metrics.panics); got != before+1 {
				t.Errorf("%s: panics_total went from %v to %v, want +1", enc.name, before, got)
			}
			if got := testutil.ToFloat64(metrics.decodeFailures); got != beforeDecode {
				t.Errorf("%s: a panic was counted as an upstream decode failure", enc.name)
			}
			var entries []observer.LoggedEntry
			for _, e := range logs.TakeAll() {
				if e.Level == zapcore.ErrorLevel {
					entries = append(entries, e)
				}
			}
			if len(entries) != 1 {
				msgs := []string{}
				for _, e := range entries {
					msgs = append(msgs, e.Message)
				}
				t.Fatalf("%s: %d error entries logged, want 1: %q", enc.name, len(entries), msgs)
			}
			fields := entries[0].ContextMap()
			if !strings.Contains(fmt.Sprint(fields["panic"]), "injected decoder panic") || !strings.Contains(fmt.Sprint(fields["stack"]), "decode") {
				t.Errorf("%s: log entry lacks the panic or its stack: %v", enc.name, fields)
			}
		}
	}
	// The handler still serves afterwards.
	o := serveChunks(t, h, map[string]string{"Content-Type": "text/html", "Content-Encoding": "gzip"}, [][]byte{compress(t, "gzip", []byte("origin.example"))})
	if o.clientSees() != "complete" || string(o.body) != "edge.example" {
		t.Errorf("after the panics: %q, %s", o.body, o.clientSees())
	}
}

// chunked cuts b into writes of at most n bytes.
func chunked(b []byte, n int) [][]byte {
	var chunks [][]byte
	for len(b) > 0 {
		k := min(n, len(b))
		chunks = append(chunks, b[:k])
		b = b[k:]
	}
	return chunks
}
