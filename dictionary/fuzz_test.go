package dictionary

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzDeltaRoundTrip compresses arbitrary bodies against arbitrary
// dictionaries in both codings, in arbitrary write sizes, and decodes them
// with the decoder of the other side given the raw dictionary: klauspost's
// zstd decoder for dcz, go-brrr's reader for dcb (andybalholm/brotli has no
// compound dictionaries; go-brrr is also the encoder, so dcb is checked
// against an independent decoder only by the browser test).
func FuzzDeltaRoundTrip(f *testing.F) {
	f.Add([]byte("function a(){return 1}"), []byte("function a(){return 2}"), uint16(3), false)
	f.Add([]byte("x"), []byte(""), uint16(1), true)
	f.Add(bytes.Repeat([]byte("abc"), 1000), bytes.Repeat([]byte("abd"), 1000), uint16(100), true)
	f.Fuzz(func(t *testing.T, dict, body []byte, chunk uint16, dcb bool) {
		if len(dict) == 0 || len(dict) > 1<<20 || len(body) > 1<<20 {
			return
		}
		coding := codingDCZ
		if dcb {
			coding = codingDCB
		}
		p := newPools(dict, testEncoderConfig)
		for range 2 { // the second time through a pooled encoder
			out := compressDelta(t, p, coding, body, int(chunk)%8192+1)
			got, err := decodeDelta(coding, dict, out)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("%s: decoded %d bytes (%v), want %d", coding, len(got), err, len(body))
			}
		}
	})
}

// FuzzServe sends arbitrary request headers (Available-Dictionary,
// Accept-Encoding, Sec-Fetch-*, If-None-Match) and bodies through the
// handler, after a first response has stored a dictionary. Whatever they
// are, it must not panic, and the client must get the body: as it is, or
// compressed against the dictionary its request named.
func FuzzServe(f *testing.F) {
	old, cur := sampleVersions(f)
	avail := formatAvailableDictionary(sha256.Sum256(old))
	// A 7-byte body: its dcz is larger, and counting the negative saving
	// once panicked (a Prometheus counter cannot go down).
	f.Add(avail, "gzip, br, dcz", "same-origin", "no-cors", "script", "", []byte("v2 body"))
	f.Add(avail, "dcb;q=0.5, dcz;q=0.1", "cross-site", "cors", "", `"x-dcz"`, cur[:1000])
	f.Add(":"+avail[2:], "DCZ", "none", "navigate", "document", "*", []byte{})
	f.Add(avail+", "+avail, "dcb", "", "", "", `W/"a-dcb", "b-dcz"`, []byte("x"))
	// A revalidation naming the coded ETag of the planned representation
	// (the origin answers 304), and one naming another dictionary's.
	etag := fmt.Sprintf(`"%x"`, sha256.Sum256(cur[:1000]))
	f.Add(avail, "dcz", "same-origin", "cors", "script", codedETag(etag, codingDCZ, sha256.Sum256(old)), cur[:1000])
	f.Add(avail, "dcb, dcz", "", "", "", codedETag(etag, codingDCB, sha256.Sum256(cur)), cur[:1000])
	h := provision(f, &Handler{Match: "/assets/*", DeltaCacheSize: 1 << 20})
	serve(f, h, browserRequest("a.test", "/assets/app.1.js"), file(old))
	f.Fuzz(func(t *testing.T, avail, acceptEncoding, site, mode, dest, inm string, body []byte) {
		req := browserRequest("a.test", "/assets/app.2.js", "Available-Dictionary", avail, "Accept-Encoding", acceptEncoding,
			"Sec-Fetch-Site", site, "Sec-Fetch-Mode", mode, "Sec-Fetch-Dest", dest, "If-None-Match", inm)
		rec := httptest.NewRecorder()
		if err := h.ServeHTTP(rec, req, file(body)); err != nil {
			t.Fatal(err)
		}
		got := rec.Body.Bytes()
		switch ce := rec.Header().Get("Content-Encoding"); ce {
		case "":
		case codingDCZ, codingDCB:
			var err error
			if got, err = decodeDelta(ce, old, got); err != nil {
				t.Fatalf("%s body does not decode: %v", ce, err)
			}
		default:
			t.Fatalf("Content-Encoding %q", ce)
		}
		if rec.Code == http.StatusOK && !bytes.Equal(got, body) {
			t.Fatalf("client got %d bytes, want the %d of the body", len(got), len(body))
		}
	})
}
