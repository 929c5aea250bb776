// Package testchromium finds Debian's chromium for tests that need a real
// browser, and gives the flags it needs to run headless on a machine whose
// network is closed.
package testchromium

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
)

// RequireEnv makes a missing chromium a failure instead of a skip; CI sets
// it and installs Debian's chromium.
const RequireEnv = "EDGEKIT_REQUIRE_CHROMIUM"

// Path returns the chromium binary, or skips t when there is none (fails
// it when RequireEnv is set).
func Path(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("chromium not installed and %s is set (apt-get install chromium)", RequireEnv)
		}
		t.Skip("chromium not installed (apt-get install chromium); set " + RequireEnv + "=1 to fail instead")
	}
	return path
}

// Args are the flags of a headless run with a fresh profile in profileDir,
// then extra. Without the background-networking flags Chromium keeps
// trying to reach Google's hosts, which a closed network refuses; root
// needs --no-sandbox. --enable-logging=stderr puts console messages
// ("CONSOLE") and uncaught errors on its stderr, for the test to read.
func Args(profileDir string, extra ...string) []string {
	return append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + profileDir,
		"--enable-logging=stderr", "--v=0",
	}, extra...)
}

// DumpDOM runs chromium with args (Args' flags and the test's own) on url
// with --dump-dom and returns the page's DOM when it has loaded, and what
// chromium wrote on stderr (console messages, with Args' logging flags).
// A failed run fails t, showing that stderr.
func DumpDOM(ctx context.Context, t testing.TB, chromium string, args []string, url string) (dom []byte, stderr string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, chromium, append(args, "--dump-dom", url)...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, errOut.String())
	}
	return dom, errOut.String()
}
