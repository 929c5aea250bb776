package caddybrotli

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	brrr "github.com/molecule-man/go-brrr"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
)

// corpusFile is one real-world payload from testdata/corpus.
type corpusFile struct {
	name string
	data []byte
}

func loadCorpus(tb testing.TB, pattern string) []corpusFile {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "corpus", pattern))
	if err != nil || len(paths) == 0 {
		tb.Fatalf("no corpus files match %q: %v", pattern, err)
	}
	files := make([]corpusFile, 0, len(paths))
	for _, path := range paths {
		if filepath.Ext(path) == ".md" {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		files = append(files, corpusFile{name: filepath.Base(path), data: data})
	}
	return files
}

// provisioned decodes the module's JSON config the way Caddy does, then
// provisions and validates it.
func provisioned(tb testing.TB, config string) (*Brotli, error) {
	tb.Helper()
	var b Brotli
	if err := json.Unmarshal([]byte(config), &b); err != nil {
		tb.Fatalf("decoding %s: %v", config, err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: tb.Context()})
	tb.Cleanup(cancel)
	if err := b.Provision(ctx); err != nil {
		return nil, err
	}
	return &b, b.Validate()
}

func mustProvision(tb testing.TB, config string) *Brotli {
	tb.Helper()
	b, err := provisioned(tb, config)
	if err != nil {
		tb.Fatalf("config %s: %v", config, err)
	}
	return b
}

func decompress(tb testing.TB, compressed []byte) []byte {
	tb.Helper()
	out, err := io.ReadAll(brotli.NewReader(bytes.NewReader(compressed)))
	if err != nil {
		tb.Fatalf("decoding Brotli stream: %v", err)
	}
	return out
}

// compressWith is the reference: the library's own writer (go-brrr), one
// Write. decompress uses the other library, andybalholm/brotli.
func compressWith(tb testing.TB, quality, lgwin int, data []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w, err := brrr.NewWriterOptions(&buf, quality, brrr.WriterOptions{LGWin: lgwin})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func TestProvisionDefaults(t *testing.T) {
	for _, tc := range []struct {
		config         string
		quality, lgwin int
	}{
		{config: `{}`, quality: 5, lgwin: 20}, // what `encode br` produces
		{config: `{"quality":0}`, quality: 0, lgwin: 20},
		{config: `{"quality":11}`, quality: 11, lgwin: 20},
		{config: `{"window":18}`, quality: 5, lgwin: 18},
		{config: `{"quality":7,"window":24}`, quality: 7, lgwin: 24},
	} {
		b := mustProvision(t, tc.config)
		if *b.Quality != tc.quality || b.Window != tc.lgwin {
			t.Errorf("%s: quality %d window %d, want %d and %d", tc.config, *b.Quality, b.Window, tc.quality, tc.lgwin)
		}
		// The encoder must really compress at that setting: its stream is the
		// library's own, byte for byte.
		data := []byte(strings.Repeat("function f(a){return a+1}var x=f(2);", 200))
		want := compressWith(t, tc.quality, tc.lgwin, data)
		var got bytes.Buffer
		enc := b.NewEncoder()
		enc.Reset(&got)
		if _, err := enc.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: encoder output (%d bytes) differs from the library at quality %d window %d (%d bytes)",
				tc.config, got.Len(), tc.quality, tc.lgwin, len(want))
		}
	}
}

func TestValidateRefusesOutOfRange(t *testing.T) {
	for config, wantErr := range map[string]string{
		`{"quality":12}`:  "br: quality 12: must be 0..11",
		`{"quality":-1}`:  "br: quality -1: must be 0..11",
		`{"window":9}`:    "br: window 9: must be 10..24",
		`{"window":25}`:   "br: window 25: must be 10..24",
		`{"window":-3}`:   "br: window -3: must be 10..24",
		`{"quality":100}`: "br: quality 100: must be 0..11",
	} {
		_, err := provisioned(t, config)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: error %v, want %q", config, err, wantErr)
		}
	}
}

// roundTrip drives an encoder the way the encode handler does: Reset to the
// response, Write data[:split], Flush, Write the rest, Close, Reset(nil). It
// checks that the flushed prefix already decodes to everything written
// before the Flush, and the whole stream to data, with both decoders.
func roundTrip(t *testing.T, enc encode.Encoder, data []byte, split int) []byte {
	t.Helper()
	stream, flushedLen, flushedData := encodeFlushed(t, enc, data, split)
	checkDecodes(t, stream, flushedLen, flushedData, data)
	return stream
}

// TestEncoderContract is Caddy's encoder contract (encode_conformance_test.go
// in Caddy): round trip with a Flush, then Reset(nil) as the pool does and
// reuse; a reused encoder must produce exactly what a fresh one does.
func TestEncoderContract(t *testing.T) {
	b := mustProvision(t, `{}`)
	reused := b.NewEncoder()
	for _, file := range loadCorpus(t, "*") {
		t.Run(file.name, func(t *testing.T) {
			half := len(file.data) / 2
			fresh := roundTrip(t, b.NewEncoder(), file.data, half)
			again := roundTrip(t, reused, file.data, half)
			reused.Reset(nil) // what the encode handler does before Put
			if !bytes.Equal(fresh, again) {
				t.Errorf("reused encoder wrote %d bytes, fresh one %d: Reset leaks state", len(again), len(fresh))
			}
			if len(fresh) >= len(file.data) {
				t.Errorf("compressed %d bytes into %d", len(file.data), len(fresh))
			}
		})
	}
}
