package integration

import (
	"fmt"
	"os"
	"testing"
)

// TestMain builds Caddy once for every test in this package, with the race
// detector when the tests themselves run with it.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "edgekit-caddy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	caddyBinary, err = BuildCaddy(dir, raceEnabled)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
