package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

// substituteMemoryBlock is 64 KiB of HTML with 256 matches of "origin.example".
var substituteMemoryBlock = func() []byte {
	line := []byte("<a href=\"https://origin.example/x\">" + strings.Repeat("lorem ipsum ", 18) + "</a>\n")
	var b bytes.Buffer
	for b.Len()+len(line) <= 64<<10 {
		b.Write(line)
	}
	b.WriteString(strings.Repeat(" ", 64<<10-b.Len()))
	return b.Bytes()
}()

// substitutePeakRSS returns the VmHWM (peak resident set) of a process, in KiB.
func substitutePeakRSS(t *testing.T, pid int) int {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kb
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestSubstituteMemory streams 1 GiB through substitute, then 200
// concurrent 10 MB responses (identity and gzip from the origin), and
// reports Caddy's peak RSS, which must stay bounded whatever the body
// size. It takes a while, so it runs only with EDGEKIT_MEMORY=1:
//
//	EDGEKIT_MEMORY=1 go test -run TestSubstituteMemory -v ./integration/
func TestSubstituteMemory(t *testing.T) {
	if os.Getenv("EDGEKIT_MEMORY") == "" {
		t.Skip("set EDGEKIT_MEMORY=1 to stream 1 GiB through substitute and report Caddy's peak RSS")
	}
	matchesPerBlock := bytes.Count(substituteMemoryBlock, []byte("origin.example"))
	origin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		blocks, _ := strconv.Atoi(r.URL.Query().Get("blocks"))
		w.Header().Set("Content-Type", "text/html")
		var out io.Writer = w
		if r.URL.Query().Get("gzip") != "" {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			defer zw.Close()
			out = zw
		} else {
			w.Header().Set("Content-Length", strconv.Itoa(blocks*len(substituteMemoryBlock)))
		}
		for range blocks {
			if _, err := out.Write(substituteMemoryBlock); err != nil {
				return
			}
		}
	}))
	c := StartCaddy(t, fmt.Sprintf(`
http://{$HOST}:{$HTTP_PORT} {
	substitute {
		replace origin.example edge.example
		regex "ipsum-(\\d+)" "n$1"
	}
	reverse_proxy %s {
		transport http {
			dial_timeout 60s
		}
	}
}
`, origin))
	pid := c.cmd.Process.Pid
	client := c.Client()
	client.Timeout = 10 * time.Minute
	fetch := func(blocks int, gz bool) error {
		url := c.URL(fmt.Sprintf("/?blocks=%d", blocks))
		if gz {
			url += "&gzip=1"
		}
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: status %d", url, resp.StatusCode)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			return err
		}
		// Each match of "origin.example" is 2 bytes shorter.
		perBlock := len(substituteMemoryBlock) - 2*matchesPerBlock
		if want := int64(blocks * perBlock); n != want {
			return fmt.Errorf("%s: got %d bytes, want %d", resp.Status, n, want)
		}
		return nil
	}
	if err := fetch(1, false); err != nil {
		t.Fatal(err)
	}
	base := substitutePeakRSS(t, pid)
	t.Logf("caddy peak RSS after start and one small response: %d MiB", base>>10)

	if err := fetch(16384, false); err != nil { // 16384 * 64 KiB = 1 GiB
		t.Fatal(err)
	}
	afterGiB := substitutePeakRSS(t, pid)
	t.Logf("caddy peak RSS after streaming 1 GiB: %d MiB", afterGiB>>10)

	for _, gz := range []bool{false, true} {
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for range 200 {
			wg.Go(func() {
				if err := fetch(160, gz); err != nil { // 10 MiB each
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		t.Logf("caddy peak RSS after 200 concurrent 10 MiB responses (gzip from origin: %v): %d MiB", gz, substitutePeakRSS(t, pid)>>10)
	}
	peak := substitutePeakRSS(t, pid)
	// Bounded: the 1 GiB body and 2 GB of concurrent bodies must not show
	// up in the resident set (with a wide margin for the runtime).
	if peak > base+512<<10 {
		t.Errorf("peak RSS grew from %d MiB to %d MiB", base>>10, peak>>10)
	}
}
