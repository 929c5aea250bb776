package caddyfile_test

import (
	"os"
	"strings"
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

// TestThrottleDocsCaddyfilesValidate: every Caddyfile docs/throttle.md
// shows adapts and provisions as it is (those with a Redis store read
// files and the environment an operator has, and are left to the docs'
// formatting check).
func TestThrottleDocsCaddyfilesValidate(t *testing.T) {
	data, err := os.ReadFile("../docs/throttle.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, block := range strings.Split(string(data), "```caddyfile\n")[1:] {
		text, _, _ := strings.Cut(block, "```")
		if strings.Contains(text, "store redis") {
			continue
		}
		n++
		if err := adapttest.Validate(text); err != nil {
			t.Errorf("docs/throttle.md Caddyfile:\n%s\n%v", text, err)
		}
	}
	if n < 5 {
		t.Fatalf("only %d Caddyfiles checked", n)
	}
}
