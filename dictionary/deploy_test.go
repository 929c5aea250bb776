package dictionary

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	brrr "github.com/molecule-man/go-brrr"
)

// TestDeployBytes measures what a deploy costs: for each pair of
// consecutive releases of a bundle (integration/bench-dict.sh fetches them
// with npm pack into $EDGEKIT_DICT_CORPUS as <name>-<version>.js, and
// lists the pairs in $EDGEKIT_DICT_PAIRS as "old:new ..."), the bytes of
// the new release as identity, br at qualities 5 and 11, and dcz and dcb
// against the old one, through the encoders the handler uses. Each
// dictionary-compressed body is decoded again and compared. It fails if
// dcz in total exceeds 15% of br q5.
func TestDeployBytes(t *testing.T) {
	dir, pairs := os.Getenv("EDGEKIT_DICT_CORPUS"), strings.Fields(os.Getenv("EDGEKIT_DICT_PAIRS"))
	if dir == "" || len(pairs) == 0 {
		t.Skip("run by integration/bench-dict.sh (EDGEKIT_DICT_CORPUS and EDGEKIT_DICT_PAIRS)")
	}
	type row struct {
		name                                string
		identity, br5, br11, dcz, dcb, dcz3 int
	}
	var rows []row
	var total row
	total.name = "total"
	for _, pair := range pairs {
		oldName, newName, ok := strings.Cut(pair, ":")
		if !ok {
			t.Fatalf("pair %q: want old:new", pair)
		}
		old, err := os.ReadFile(filepath.Join(dir, oldName+".js"))
		if err != nil {
			t.Fatal(err)
		}
		cur, err := os.ReadFile(filepath.Join(dir, newName+".js"))
		if err != nil {
			t.Fatal(err)
		}
		r := row{name: releaseName(oldName) + " → " + releaseVersion(newName), identity: len(cur)}
		r.br5, r.br11 = brotliSize(t, cur, 5), brotliSize(t, cur, 11)
		p := newPools(old, testEncoderConfig)
		for _, coding := range []string{codingDCZ, codingDCB} {
			body := compressDelta(t, p, coding, cur, 32<<10)
			got, err := decodeDelta(coding, old, body)
			if err != nil || !bytes.Equal(got, cur) {
				t.Fatalf("%s %s: does not decode to the new release: %v", pair, coding, err)
			}
			if coding == codingDCZ {
				r.dcz = len(body)
			} else {
				r.dcb = len(body)
			}
		}
		best := testEncoderConfig
		best.zstdLevel = zstd.SpeedBestCompression
		r.dcz3 = len(compressDelta(t, newPools(old, best), codingDCZ, cur, 32<<10))
		rows = append(rows, r)
		total.identity += r.identity
		total.br5 += r.br5
		total.br11 += r.br11
		total.dcz += r.dcz
		total.dcb += r.dcb
		total.dcz3 += r.dcz3
	}
	rows = append(rows, total)
	var b strings.Builder
	fmt.Fprintf(&b, "| deploy | identity | br q5 | br q11 | dcz (default) | dcz (best) | dcb q5 | dcz / br q5 | dcb / br q5 |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %.1f%% | %.1f%% |\n", r.name, r.identity, r.br5, r.br11, r.dcz, r.dcz3, r.dcb,
			100*float64(r.dcz)/float64(r.br5), 100*float64(r.dcb)/float64(r.br5))
	}
	t.Log("\n" + b.String())
	if float64(total.dcz) > 0.15*float64(total.br5) {
		t.Errorf("dcz: %d bytes in total, more than 15%% of br q5's %d", total.dcz, total.br5)
	}
}

func brotliSize(t testing.TB, body []byte, quality int) int {
	t.Helper()
	var out bytes.Buffer
	w, err := brrr.NewWriterOptions(&out, quality, brrr.WriterOptions{LGWin: 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Len()
}

// releaseName turns "react-dom-18.2.0" into "react-dom 18.2.0".
func releaseName(s string) string {
	if i := strings.LastIndexByte(s, '-'); i > 0 {
		return s[:i] + " " + s[i+1:]
	}
	return s
}

// releaseVersion is the version of "react-dom-18.3.1": "18.3.1".
func releaseVersion(s string) string { return s[strings.LastIndexByte(s, '-')+1:] }
