package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// client_ip under attack, end to end (issue 14, items 3 and 7, and the
// unset-placeholder secret). The test client plays the edge: its peer is
// loopback, which the sites trust, and the headers it sends are what an edge
// forwards: the caller's own value with the edge's entry appended.

// TestClientIPCallerPaddingEndToEnd: whatever a caller writes left of the
// client entry (empty members, junk, many header lines, in X-Forwarded-For
// or Forwarded) neither makes the edge the client nor lets the caller escape
// a block list on its address; the origin gets an X-Forwarded-For that
// starts at the caller.
func TestClientIPCallerPaddingEndToEnd(t *testing.T) {
	origin := EchoOrigin(t)
	route := func(path, options string) string {
		return `
	handle ` + path + `* {
		client_ip {
			trusted_proxies 127.0.0.0/8 ::1
			` + options + `
		}
		@blocked client_ip 6.6.6.6/32
		respond @blocked "blocked {client_ip}" 403
		request_header X-Seen-Client {client_ip}
		request_header X-Seen-Via-Edge {http.client_ip.via_edge}
		reverse_proxy ` + origin + `
	}`
	}
	c := StartCaddy(t, `
http://{$HOST}:{$HTTP_PORT} {`+route("/xff/", "")+route("/fwd/", "forwarded")+`
}`)

	manyLines := func(line string, n int, last string) []string {
		lines := make([]string, 0, n+1)
		for range n {
			lines = append(lines, line)
		}
		return append(lines, last)
	}
	for _, tc := range []struct {
		name, path, header string
		lines              []string // as the edge forwards them
	}{
		{"xff plain", "/xff/plain", "X-Forwarded-For", []string{"6.6.6.6"}},
		{"xff 64 empty members", "/xff/empty", "X-Forwarded-For", []string{strings.Repeat(",", 64) + ", 6.6.6.6"}},
		{"xff 8 KiB of junk", "/xff/junk", "X-Forwarded-For", []string{strings.Repeat("x", 8<<10) + ", 6.6.6.6"}},
		{"xff 100 header lines", "/xff/lines", "X-Forwarded-For", manyLines("1.1.1.1", 100, "6.6.6.6")},
		{"forwarded plain", "/fwd/plain", "Forwarded", []string{"for=6.6.6.6"}},
		{"forwarded 70 elements", "/fwd/elements", "Forwarded", []string{strings.Repeat("for=1.1.1.1, ", 70) + "for=6.6.6.6"}},
		{"forwarded 8 KiB in an unterminated quote", "/fwd/quote", "Forwarded", []string{`for="` + strings.Repeat("x", 8<<10) + `, for=6.6.6.6`}},
		{"forwarded 100 header lines", "/fwd/lines", "Forwarded", manyLines("for=1.1.1.1", 100, "for=6.6.6.6")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A blocked caller stays blocked, whatever it wrote.
			req, _ := http.NewRequest(http.MethodGet, c.URL(tc.path), nil)
			req.Header[tc.header] = tc.lines
			resp, body := Do(t, c.Client(), req)
			if resp.StatusCode != http.StatusForbidden || body != "blocked 6.6.6.6" {
				t.Errorf("caller 6.6.6.6 with its padding: %d %q, want 403 %q", resp.StatusCode, body, "blocked 6.6.6.6")
			}

			// The same padding in front of an allowed caller: it is the
			// client, and the origin's X-Forwarded-For starts with it.
			allowed := make([]string, len(tc.lines))
			copy(allowed, tc.lines)
			last := len(allowed) - 1
			allowed[last] = strings.Replace(allowed[last], "6.6.6.6", "203.0.113.7", 1)
			req, _ = http.NewRequest(http.MethodGet, c.URL(tc.path+"-allowed"), nil)
			req.Header[tc.header] = allowed
			echo, _ := GetEcho(t, c.Client(), req)
			h := http.Header(echo.Headers)
			if got := h.Get("X-Seen-Client"); got != "203.0.113.7" || h.Get("X-Seen-Via-Edge") != "true" {
				t.Errorf("client %q via_edge %q, want 203.0.113.7 true", got, h.Get("X-Seen-Via-Edge"))
			}
			xff := strings.Join(h.Values("X-Forwarded-For"), ", ")
			if !strings.HasPrefix(xff, "203.0.113.7, ") || strings.Contains(xff, "1.1.1.1") || strings.Contains(xff, "xxx") {
				t.Errorf("origin got X-Forwarded-For %.200q, want the caller then the peer", xff)
			}
		})
	}
}

// clientIPLogFilter is the documented access log filter, word for word:
// TestClientIPLogFilterIsTheDocumentedOne keeps the two in step.
const clientIPLogFilter = `
	log {
		format filter {
			request>headers>X-Edge-Secret delete
		}
	}`

// TestClientIPLogFilterIsTheDocumentedOne: the README, the client_ip
// reference and the example ship the very filter the test below proves.
func TestClientIPLogFilterIsTheDocumentedOne(t *testing.T) {
	want := trimLines(clientIPLogFilter)
	for _, f := range []string{"../README.md", "../docs/client_ip.md", "../examples/Caddyfile"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(trimLines(string(b)), want) {
			t.Errorf("%s does not show the access log filter this test proves:\n%s", f, clientIPLogFilter)
		}
	}
}

// trimLines drops each line's indentation, so a block compares the same at
// any depth.
func trimLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, "\n")
}

// TestClientIPSecretNotInAccessLog: with the documented filter the access
// log records the request but never the secret; without it (the control,
// in the same Caddy) the secret is there, so the check can fail. The origin
// never sees the secret either.
func TestClientIPSecretNotInAccessLog(t *testing.T) {
	const secret = "pop-proves-itself-7f3a9c"
	origin := EchoOrigin(t)
	site := func(log string) string {
		return log + `
	client_ip {
		trusted_proxies 127.0.0.0/8 ::1
		secret X-Edge-Secret {env.EDGE_SECRET}
	}
	request_header X-Seen-Via-Edge {http.client_ip.via_edge}
	reverse_proxy ` + origin
	}
	c := StartCaddyWith(t, Options{Env: []string{"EDGE_SECRET=" + secret}}, `
http://{$HOST}:{$HTTP_PORT} {`+site(clientIPLogFilter)+`
}
https://localhost:{$HTTPS_PORT} {
	tls internal`+site("\n\tlog")+`
}`)
	c.WaitHTTPS(t)

	get := func(t *testing.T, client *http.Client, url string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("X-Edge-Secret", secret)
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		req.Header.Set("X-Marker", "logged")
		echo, _ := GetEcho(t, client, req)
		h := http.Header(echo.Headers)
		if h.Get("X-Seen-Via-Edge") != "true" {
			t.Errorf("%s: not through the edge despite the right secret", url)
		}
		if v := h.Values("X-Edge-Secret"); len(v) != 0 {
			t.Errorf("%s: the secret went upstream: %q", url, v)
		}
	}
	get(t, c.Client(), c.URL("/filtered"))
	get(t, c.Client(), c.HTTPSURL("/unfiltered"))

	type entry struct {
		Logger  string `json:"logger"`
		Request struct {
			URI     string              `json:"uri"`
			Headers map[string][]string `json:"headers"`
		} `json:"request"`
	}
	var filtered, unfiltered *entry
	WaitFor(context.Background(), 10*time.Second, func() bool {
		filtered, unfiltered = nil, nil
		for line := range strings.SplitSeq(c.Logs(), "\n") {
			var e entry
			if json.Unmarshal([]byte(line), &e) != nil || !strings.HasPrefix(e.Logger, "http.log.access") {
				continue
			}
			switch e.Request.URI {
			case "/filtered":
				if strings.Contains(line, secret) {
					t.Errorf("the secret is in the filtered access log line: %s", line)
				}
				filtered = &e
			case "/unfiltered":
				unfiltered = &e
			}
		}
		return filtered != nil && unfiltered != nil
	})
	if filtered == nil {
		t.Fatalf("the request through the filtered log was not logged:\n%s", c.Logs())
	}
	if got := filtered.Request.Headers["X-Marker"]; len(got) != 1 || got[0] != "logged" {
		t.Errorf("filtered line lacks the other request headers: %v", filtered.Request.Headers)
	}
	if _, ok := filtered.Request.Headers["X-Edge-Secret"]; ok {
		t.Errorf("filtered line still has the X-Edge-Secret field: %v", filtered.Request.Headers)
	}
	if unfiltered == nil || len(unfiltered.Request.Headers["X-Edge-Secret"]) != 1 || unfiltered.Request.Headers["X-Edge-Secret"][0] != secret {
		t.Fatalf("control: without the filter the access log should record the secret, got %+v", unfiltered)
	}
	for line := range strings.SplitSeq(c.Logs(), "\n") {
		if strings.Contains(line, secret) && !strings.Contains(line, `"uri":"/unfiltered"`) {
			t.Errorf("the secret appears outside the unfiltered control line: %s", line)
		}
	}
}

// TestClientIPSecretPlaceholderMustResolve: a secret whose placeholder is
// unset ({env.UNSET}abc) would silently be "abc", a secret anyone can guess.
// Caddy refuses to start with it, and /load refuses it while the running
// config keeps serving.
func TestClientIPSecretPlaceholderMustResolve(t *testing.T) {
	const want = "client_ip: secret X-Edge-Secret: placeholder {env.EDGEKIT_TEST_NEVER_SET} is empty or unset"
	site := func(secret string) string {
		return `
http://{$HOST}:{$HTTP_PORT} {
	client_ip {
		secret X-Edge-Secret ` + secret + `
	}
	respond "{http.client_ip.via_edge}"
}`
	}

	t.Run("start", func(t *testing.T) {
		dir := t.TempDir()
		config := filepath.Join(dir, "Caddyfile")
		port := FreePort(t)
		err := os.WriteFile(config, []byte("{\n\tadmin off\n\tpersist_config off\n}\n"+site("{env.EDGEKIT_TEST_NEVER_SET}abc")), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, caddyBinary, "run", "--config", config, "--adapter", "caddyfile")
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + dir, "XDG_DATA_HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "PATH=" + os.Getenv("PATH"),
			"HOST=127.0.0.1", "HTTP_PORT=" + strconv.Itoa(port)}
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("caddy started with the secret \"abc\" (killed after 30 s):\n%s", out)
		}
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("caddy run: %v, want a start failure saying %q; output:\n%s", err, want, out)
		}
	})

	t.Run("load", func(t *testing.T) {
		c := StartCaddyWith(t, Options{Env: []string{"EDGE_SECRET=good"}}, site("{env.EDGE_SECRET}"))
		serving := func(t *testing.T) {
			t.Helper()
			resp, body := Get(t, c.Client(), c.URL("/"), "X-Edge-Secret", "good", "X-Forwarded-For", "203.0.113.7")
			if resp.StatusCode != http.StatusOK || body != "true" {
				t.Fatalf("running config: %d %q, want 200 true", resp.StatusCode, body)
			}
			resp, body = Get(t, c.Client(), c.URL("/"), "X-Edge-Secret", "abc", "X-Forwarded-For", "203.0.113.7")
			if resp.StatusCode != http.StatusOK || body != "false" {
				t.Fatalf("running config with the guessable secret: %d %q, want 200 false", resp.StatusCode, body)
			}
		}
		serving(t)
		status, body := c.Load(site("{env.EDGEKIT_TEST_NEVER_SET}abc"))
		var answer struct{ Error string }
		if json.Unmarshal([]byte(body), &answer) == nil && answer.Error != "" {
			body = answer.Error
		}
		if status == http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/load with secret {env.EDGEKIT_TEST_NEVER_SET}abc: %d %q, want a refusal saying %q", status, body, want)
		}
		serving(t)
	})
}
