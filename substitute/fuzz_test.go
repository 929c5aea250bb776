package substitute

import (
	"bytes"
	"testing"
)

// FuzzResponse feeds arbitrary upstream responses (body, Content-Type,
// Content-Encoding, write sizes) through the handler. Whatever the input it
// must neither panic nor hang; a body sent compressed must come out as the
// same body sent plain; and neither the output nor whether the response
// aborts may depend on write sizes.
func FuzzResponse(f *testing.F) {
	f.Add([]byte(`<a href="https://origin.example/x">id-42</a>`), uint8(0), uint16(3), "text/html; charset=utf-8")
	f.Add([]byte("origin.example"), uint8(0x81), uint16(1), "text/plain")
	f.Add([]byte("id-1 id-22 origin.exampl"), uint8(0x82), uint16(7), "TEXT/HTML")
	f.Add([]byte("id-99"), uint8(0x83), uint16(2), "application/json;x=y")
	f.Add([]byte("origin.example"), uint8(0x84), uint16(5), "text/css")
	f.Add([]byte("\x1f\x8b\x08\x00garbage"), uint8(1), uint16(4), "text/html")
	f.Add([]byte("x"), uint8(5), uint16(1), "")
	h := basicHandler(f)
	encodings := []string{"identity", "gzip", "deflate", "br", "zstd", "compress"}
	f.Fuzz(func(t *testing.T, body []byte, enc uint8, chunk uint16, ctype string) {
		e := encodings[int(enc&0x7f)%len(encodings)]
		compressed := enc&0x80 != 0 && e != "identity" && e != "compress"
		sent := body
		if compressed {
			sent = compress(t, e, body)
		}
		hdr := map[string]string{"Content-Type": ctype, "Content-Encoding": e}
		o := serveChunks(t, h, hdr, chunked(sent, int(chunk)%4096+1))
		got := o.body
		if !compressed {
			// Whether the response aborts (a body that is not what its
			// Content-Encoding says), and a complete body, must not depend
			// on write sizes either.
			whole := serveChunks(t, h, hdr, chunked(sent, len(sent)+1))
			if o.clientSees() != whole.clientSees() {
				t.Fatalf("outcome depends on write sizes: %s vs %s", o.clientSees(), whole.clientSees())
			}
			if o.clientSees() == "complete" && !bytes.Equal(got, whole.body) {
				t.Fatalf("output depends on write sizes: %q vs %q", got, whole.body)
			}
			return
		}
		if o.clientSees() != "complete" {
			t.Fatalf("%s body of type %q aborted", e, ctype)
		}
		if !h.typeMatches(mediaTypeOf(ctype)) {
			if !bytes.Equal(got, sent) {
				t.Fatalf("%s body of type %q changed", e, ctype)
			}
			return
		}
		plain := serve(t, h, request("GET", "/"), origin(200, map[string]string{"Content-Type": ctype}, body, len(body)+1)).Body.Bytes()
		if !bytes.Equal(got, plain) {
			t.Fatalf("%s body decodes and substitutes to %q, plain body to %q", e, got, plain)
		}
	})
}
