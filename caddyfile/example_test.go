package caddyfile_test

import (
	"os"
	"testing"

	"github.com/caddy-edgekit/edgekit/internal/adapttest"
)

// TestExampleCaddyfileIsValid keeps the README's demo command working: the
// demo must adapt and provision as it is.
func TestExampleCaddyfileIsValid(t *testing.T) {
	data, err := os.ReadFile("../examples/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	if err := adapttest.Validate(string(data)); err != nil {
		t.Fatalf("examples/Caddyfile: %v", err)
	}
}
