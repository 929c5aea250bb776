package caddyfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-edgekit/edgekit"
	"github.com/caddy-edgekit/edgekit/internal/adapttest"
)

// TestAdapt runs every testdata/*.caddyfiletest, in Caddy's own format: a
// Caddyfile, a line of dashes, then either the expected JSON or a fragment of
// the expected error. An error is looked for first in adapting, then in
// provisioning the adapted config (caddy.Validate), since refusals such as
// `hops 0` belong to Validate and must stop `caddy validate` and `/load`.
func TestAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/*.caddyfiletest")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*.caddyfiletest files")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			caddyfileText, expected, ok := strings.Cut(string(data), "----------")
			if !ok {
				t.Fatalf("%s: no ---------- separator", file)
			}
			caddyfileText = strings.TrimSpace(caddyfileText) + "\n"
			expected = strings.TrimSpace(expected)

			if strings.HasPrefix(expected, "{") {
				if !caddytest.CompareAdapt(t, file, caddyfileText, "caddyfile", expected) {
					t.Errorf("%s: adapted JSON differs from the expected JSON (diff above)", file)
				}
				return
			}
			if expected == "" {
				t.Fatalf("%s: expected part is empty", file)
			}
			got := adapttest.Validate(caddyfileText)
			if got == nil {
				t.Fatalf("%s: expected an error containing %q, got none", file, expected)
			}
			if !strings.Contains(got.Error(), expected) {
				t.Errorf("%s: error\n  %v\ndoes not contain\n  %s", file, got, expected)
			}
		})
	}
}
