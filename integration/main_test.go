package integration

import (
	"fmt"
	"os"
	"testing"
)

// buildDir holds the binaries built for this run.
var buildDir string

// TestMain builds Caddy once for every test in this package, with the race
// detector when the tests themselves run with it.
func TestMain(m *testing.M) {
	var err error
	buildDir, err = os.MkdirTemp("", "edgekit-caddy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	caddyBinary, err = BuildCaddy(buildDir, raceEnabled)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(buildDir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(buildDir)
	os.Exit(code)
}
