package dictionary

import (
	"bytes"
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
