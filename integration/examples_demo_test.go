package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/loopback"
)

// demoCommand is one shell line of examples/Caddyfile's header comment and
// the comment under it saying what it shows.
type demoCommand struct {
	line  int
	shell string
	claim string
}

// demoCommands reads the header comment of examples/Caddyfile: a shell line
// is indented three spaces after the '#', its claim (one or more lines)
// seven spaces and a '#'.
func demoCommands(t *testing.T, file string) (run string, cmds []demoCommand) {
	t.Helper()
	for i, l := range strings.Split(file, "\n") {
		if !strings.HasPrefix(l, "#") {
			break
		}
		switch {
		case strings.HasPrefix(l, "#       # "):
			if len(cmds) == 0 {
				t.Fatalf("examples/Caddyfile:%d: a claim before any command", i+1)
			}
			c := &cmds[len(cmds)-1]
			c.claim = strings.TrimSpace(c.claim + " " + strings.TrimPrefix(l, "#       # "))
		case strings.HasPrefix(l, "#   go run "):
			run = strings.TrimPrefix(l, "#   ")
		case strings.HasPrefix(l, "#   "):
			cmds = append(cmds, demoCommand{line: i + 1, shell: strings.TrimPrefix(l, "#   ")})
		}
	}
	return run, cmds
}

// TestExampleCaddyfileDoesWhatItSays starts a real Caddy on
// examples/Caddyfile (its addresses moved to a loopback address of the
// test's own), runs the file's own shell lines in order, as a reader would,
// and checks each shows what its comment says. A line without a check here,
// or a check whose line left the file, fails the test, so the file and the
// test cannot drift apart.
func TestExampleCaddyfileDoesWhatItSays(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH, and the demo's lines use it: apt-get install %s", tool, tool)
		}
	}
	raw, err := os.ReadFile("../examples/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	file := string(raw)
	run, cmds := demoCommands(t, file)

	// The README's demo command is the file's.
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if run == "" || !strings.Contains(string(readme), "\n"+run+"\n") {
		t.Errorf("examples/Caddyfile says to start it with %q, which the README's demo command is not", run)
	}

	// Each check's key is the shell line exactly as the file writes it.
	checks := map[string]func(out string) error{
		`curl -i http://localhost:8080/`: func(out string) error {
			head, body, _ := strings.Cut(out, "\r\n\r\n")
			lower := strings.ToLower(head)
			switch {
			case !strings.HasPrefix(head, "HTTP/1.1 200 "):
				return fmt.Errorf("status is not 200")
			case !strings.Contains(lower, "\r\nratelimit: ") || !strings.Contains(lower, "\r\nratelimit-policy: "):
				return fmt.Errorf("no RateLimit and RateLimit-Policy headers")
			case strings.Contains(body, "origin.example"):
				return fmt.Errorf("origin.example is still in the body")
			case strings.Count(body, "https://cdn.example/") < 5:
				return fmt.Errorf("the origin's links did not become https://cdn.example/")
			case !strings.Contains(body, "Hello from the edge (not the origin)"):
				return fmt.Errorf("the regex rule did not rewrite the heading")
			}
			return nil
		},
		`curl -s -o /dev/null -D - -H 'Accept-Encoding: br' http://localhost:8080/ | grep -i '^content-encoding'`: func(out string) error {
			if strings.TrimSpace(strings.ToLower(out)) != "content-encoding: br" {
				return fmt.Errorf("the answer is not Brotli")
			}
			return nil
		},
		`curl -s -H 'X-Forwarded-For: 203.0.113.7' http://localhost:8080/ | grep 'you are'`: func(out string) error {
			if !strings.Contains(out, "you are 203.0.113.7\n") {
				return fmt.Errorf("the origin was not told the caller is 203.0.113.7")
			}
			return nil
		},
		`for i in $(seq 12); do curl -s -o /dev/null -w '%{http_code} ' http://localhost:8080/; done; echo`: func(out string) error {
			codes := strings.Fields(out)
			if len(codes) != 12 {
				return fmt.Errorf("want 12 status codes")
			}
			// The burst is spent within the loop; refilling takes 6 s a
			// request, far longer than 12 requests on loopback.
			seen429 := false
			for _, c := range codes {
				switch {
				case c == "429":
					seen429 = true
				case c == "200" && !seen429:
				default:
					return fmt.Errorf("want 200s then 429s")
				}
			}
			if codes[0] != "200" || !seen429 {
				return fmt.Errorf("want 200s then 429s")
			}
			return nil
		},
		`curl -s http://localhost:8080/`: func(out string) error {
			if !regexp.MustCompile(`^slow down, 127\.0\.0\.1: retry in [1-6]s$`).MatchString(out) {
				return fmt.Errorf("not the 429 page with its Retry-After")
			}
			return nil
		},
	}
	inFile := map[string]bool{}
	for _, c := range cmds {
		inFile[c.shell] = true
		if checks[c.shell] == nil {
			t.Errorf("examples/Caddyfile:%d: %q has no check in this test: add one for what it says (%s)", c.line, c.shell, c.claim)
		}
		if c.claim == "" {
			t.Errorf("examples/Caddyfile:%d: %q says nothing about what it shows", c.line, c.shell)
		}
	}
	for shell := range checks {
		if inFile[shell] {
			continue
		}
		t.Errorf("examples/Caddyfile no longer has the line %q this test checks: update the test", shell)
	}
	if t.Failed() {
		return
	}

	// The demo's addresses, moved to this test's own: the global block
	// (only the admin address) goes, the harness writes its own.
	const global = "{\n\tadmin localhost:2019\n}\n"
	if strings.Count(file, global) != 1 {
		t.Fatalf("examples/Caddyfile's global options are no longer just %q: teach this test what to keep", global)
	}
	sites := strings.Replace(file, global, "", 1)
	sites = strings.ReplaceAll(sites, "http://localhost:8080", "http://{$HOST}:{$HTTP_PORT}")
	sites = strings.ReplaceAll(sites, "localhost:9080", "{$HOST}:{$ORIGIN_PORT}")
	if strings.Contains(sites, "localhost") {
		t.Fatal("examples/Caddyfile names localhost somewhere this test does not move")
	}
	host := loopback.Claim(t)
	originPort := loopback.FreePort(t, host)
	c := startCaddyOn(t, Options{Env: []string{"ORIGIN_PORT=" + strconv.Itoa(originPort)}}, host, func() ports {
		for range 100 { // the origin's port is a fourth, distinct
			if p := freePorts(t, host); !slices.Contains([]int{p.http, p.https, p.admin}, originPort) {
				return p
			}
		}
		t.Fatalf("no three free ports on %s besides the origin's %d", host, originPort)
		return ports{}
	}, sites)

	for _, cmd := range cmds {
		shell := strings.ReplaceAll(cmd.shell, "http://localhost:8080", "http://"+c.HTTPAddr())
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		out, err := exec.CommandContext(ctx, "bash", "-c", "set -o pipefail; "+shell).Output()
		cancel()
		if err != nil {
			t.Errorf("examples/Caddyfile:%d: %s: %v", cmd.line, cmd.shell, err)
			continue
		}
		if err := checks[cmd.shell](string(out)); err != nil {
			t.Errorf("examples/Caddyfile:%d: %s\nsays: %s\nbut %v; it printed:\n%s", cmd.line, cmd.shell, cmd.claim, err, out)
		}
	}
}
