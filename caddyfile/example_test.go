package caddyfile_test

import (
	"os"
	"testing"
)

// TestExampleCaddyfileIsValid keeps the README's demo command working: the
// demo must adapt and provision as it is.
func TestExampleCaddyfileIsValid(t *testing.T) {
	data, err := os.ReadFile("../examples/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	if err := adaptOrValidateError(string(data)); err != nil {
		t.Fatalf("examples/Caddyfile: %v", err)
	}
}
