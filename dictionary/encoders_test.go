package dictionary

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	brrr "github.com/molecule-man/go-brrr"
)

// testEncoderConfig is the handler's default encoder configuration.
var testEncoderConfig = encoderConfig{zstdLevel: zstd.SpeedDefault, dcb: true, dcbQuality: DefaultDCBQuality, dcbLGWin: DefaultDCBWindow}

// compressDelta compresses body against dict in coding, through the pools
// the handler uses, in writes of chunk bytes.
func compressDelta(t testing.TB, p *encoderPools, coding string, body []byte, chunk int) []byte {
	t.Helper()
	var out bytes.Buffer
	enc, err := p.acquire(coding)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.start(coding, enc, &out); err != nil {
		t.Fatal(err)
	}
	for rest := body; len(rest) > 0; {
		n := min(chunk, len(rest))
		if _, err := enc.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	p.put(coding, enc)
	return out.Bytes()
}

// decodeDelta checks the RFC 9842 header of a dictionary-compressed body
// and decodes it with the other side's decoder given the raw dictionary:
// klauspost's zstd decoder for dcz, go-brrr's reader for dcb
// (andybalholm/brotli cannot decode compound dictionaries).
func decodeDelta(coding string, dict, body []byte) ([]byte, error) {
	hash := sha256.Sum256(dict)
	var magic []byte
	switch coding {
	case codingDCZ:
		magic = magicDCZ[:]
	case codingDCB:
		magic = magicDCB[:]
	}
	if len(body) < len(magic)+hashSize || !bytes.Equal(body[:len(magic)], magic) {
		return nil, errors.New("no dictionary header")
	}
	if !bytes.Equal(body[len(magic):len(magic)+hashSize], hash[:]) {
		return nil, errors.New("header names another dictionary")
	}
	payload := body[len(magic)+hashSize:]
	switch coding {
	case codingDCZ:
		window := max(8<<20, len(dict)+len(dict)/4)
		dec, err := zstd.NewReader(bytes.NewReader(payload), zstd.WithDecoderDictRaw(0, dict),
			zstd.WithDecoderMaxWindow(uint64(window)), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(64<<20))
		if err != nil {
			return nil, err
		}
		defer dec.Close()
		return io.ReadAll(dec)
	default:
		r, err := brrr.NewReaderOptions(bytes.NewReader(payload), brrr.ReaderOptions{Dictionaries: [][]byte{dict}})
		if err != nil {
			return nil, err
		}
		return io.ReadAll(io.LimitReader(r, 64<<20))
	}
}

func newPools(dict []byte, cfg encoderConfig) *encoderPools {
	p := new(encoderPools)
	p.init(dict, sha256.Sum256(dict), cfg)
	return p
}

func TestDeltaRoundTrip(t *testing.T) {
	old, cur := sampleVersions(t)
	for _, coding := range []string{codingDCZ, codingDCB} {
		p := newPools(old, testEncoderConfig)
		for _, chunk := range []int{1 << 20, 4096, 7} {
			if chunk == 7 && testing.Short() {
				continue
			}
			body := compressDelta(t, p, coding, cur, chunk)
			got, err := decodeDelta(coding, old, body)
			if err != nil || !bytes.Equal(got, cur) {
				t.Fatalf("%s chunk %d: decoded %d bytes, %v; want %d bytes", coding, chunk, len(got), err, len(cur))
			}
			if len(body) > len(cur)/5 {
				t.Errorf("%s: %d bytes for a %d-byte near copy of the dictionary: the dictionary was not used", coding, len(body), len(cur))
			}
		}
		// Decoding against another dictionary must fail (or differ), so
		// the header check above is what ties a body to its dictionary.
		body := compressDelta(t, p, coding, cur, 1<<20)
		other := bytes.Clone(old)
		other[len(other)/2] ^= 0xff
		if got, err := decodeDelta(coding, other, body); err == nil && bytes.Equal(got, cur) {
			t.Errorf("%s: decoded with another dictionary", coding)
		}
	}
}

// TestDCZDecodesWithZstdCLI decodes dcz with the reference C
// implementation (Debian's zstd), which skips the dcz header as the
// skippable frame it is and reads the raw dictionary with -D.
func TestDCZDecodesWithZstdCLI(t *testing.T) {
	zstdCLI, err := exec.LookPath("zstd")
	if err != nil {
		if os.Getenv("EDGEKIT_REQUIRE_ZSTD") != "" {
			t.Fatal("zstd not installed (apt-get install zstd)")
		}
		t.Skip("zstd CLI not installed")
	}
	old, cur := sampleVersions(t)
	dir := t.TempDir()
	dictFile := filepath.Join(dir, "dict")
	if err := os.WriteFile(dictFile, old, 0o600); err != nil {
		t.Fatal(err)
	}
	body := compressDelta(t, newPools(old, testEncoderConfig), codingDCZ, cur, 16<<10)
	cmd := exec.Command(zstdCLI, "-q", "-d", "-c", "-D", dictFile, "--long=27")
	cmd.Stdin = bytes.NewReader(body)
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("zstd -d -D: %v", err)
	}
	if !bytes.Equal(got, cur) {
		t.Fatalf("zstd CLI decoded %d bytes, want %d identical", len(got), len(cur))
	}
}

func TestDCZWindow(t *testing.T) {
	for _, n := range []int{1, 100 << 10, 4 << 20, 7 << 20, 13 << 20, 64 << 20} {
		w := dczWindow(n)
		allowed := min(max(8<<20, n+n/4), maxDCZWindow)
		if w > allowed || w&(w-1) != 0 || w < minDCZWindow {
			t.Errorf("dczWindow(%d) = %d: want a power of two <= %d", n, w, allowed)
		}
		if n <= 32<<20 && w < n {
			t.Errorf("dczWindow(%d) = %d: smaller than the dictionary", n, w)
		}
	}
}

// sampleVersions gives two versions of a script: the committed sample of
// react-dom, and that sample with a few edits, as a release makes them.
func sampleVersions(t testing.TB) (old, cur []byte) {
	t.Helper()
	old, err := os.ReadFile("../brotli/testdata/corpus/react-dom.production.min.js")
	if err != nil {
		t.Fatal(err)
	}
	cur = bytes.Clone(old)
	for i := 1; i < 20; i++ {
		at := i * len(cur) / 20
		cur = append(cur[:at:at], append([]byte(fmt.Sprintf("/*v2 edit %d*/", i)), cur[at:]...)...)
	}
	return old, cur
}
