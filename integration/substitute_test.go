package integration

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// substituteRules are the rules every substitute route of these tests uses.
const substituteRules = `
		replace origin.example edge.example
		regex ` + "`id-(\\d+)`" + ` "n$1"
		replace ONCE once-done once
		replace PATH "{path}"`

// substitutePage is an HTML page with many matches, some across the
// 32 KiB boundaries of reverse_proxy's and file_server's copy buffers. At
// ~450 KB it is past the 256 KiB after which substitute's output buffer
// grows, so every test below also goes through the larger buffer.
func substitutePage() []byte {
	var b bytes.Buffer
	b.WriteString("<html><body>ONCE ONCE\n")
	for i := range 8000 {
		fmt.Fprintf(&b, "<a href=\"https://origin.example/p/id-%d\">item %d</a>\n", i, i)
	}
	b.WriteString("</body></html>\n")
	return b.Bytes()
}

// substituteExpected is what substitute must make of substitutePage.
func substituteExpected(page []byte) string {
	s := strings.ReplaceAll(string(page), "origin.example", "edge.example")
	s = regexp.MustCompile(`id-(\d+)`).ReplaceAllString(s, "n$1")
	return strings.Replace(s, "ONCE", "once-done", 1)
}

func substituteEncode(t testing.TB, enc string, b []byte) []byte {
	var buf bytes.Buffer
	w, err := substituteEncoder(enc, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if w == nil {
		return b
	}
	_, _ = w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// encodeWriter is a compressing writer.
type encodeWriter interface {
	io.Writer
	Flush() error
	Close() error
}

// substituteEncoder returns a writer compressing into w in the coding enc
// (gzip, deflate, br or zstd), or nil for any other.
func substituteEncoder(enc string, w io.Writer) (encodeWriter, error) {
	switch enc {
	case "gzip":
		return gzip.NewWriter(w), nil
	case "deflate":
		return zlib.NewWriter(w), nil
	case "br":
		return brotli.NewWriter(w), nil
	case "zstd":
		return zstd.NewWriter(w)
	}
	return nil, nil
}

// substituteEnv is one Caddy with substitute in front of a real origin, a
// file_server and an SSE origin.
type substituteEnv struct {
	caddy *Caddy
	page  []byte
	video []byte
	// sseAck receives one value each time the client has read an event the
	// origin waits for.
	sseAck chan struct{}
}

func startSubstitute(t *testing.T) *substituteEnv {
	t.Helper()
	env := &substituteEnv{page: substitutePage(), video: bytes.Repeat([]byte("origin.example video "), 5000), sseAck: make(chan struct{}, 4)}
	modTime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mux := http.NewServeMux()
	mux.HandleFunc("/rp/enc/{enc}", func(w http.ResponseWriter, r *http.Request) {
		enc := r.PathValue("enc")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if enc == "compress" { // an encoding substitute does not know
			w.Header().Set("Content-Encoding", "compress")
			_, _ = w.Write([]byte("origin.example raw"))
			return
		}
		if enc != "identity" {
			w.Header().Set("Content-Encoding", enc)
		}
		_, _ = w.Write(substituteEncode(t, enc, env.page))
	})
	serveContent := func(name, etag string, body []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Etag", etag)
			http.ServeContent(w, r, name, modTime, bytes.NewReader(body))
		}
	}
	mux.HandleFunc("/rp/page.html", serveContent("page.html", `"page-v1"`, env.page))
	mux.HandleFunc("/rp/plain.html", serveContent("plain.html", `"plain-v1"`, []byte("<p>nothing to replace here</p>")))
	mux.HandleFunc("/rp/video.mp4", serveContent("video.mp4", `"video-v1"`, env.video))
	mux.HandleFunc("/rp/empty", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/rp/placeholder/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("at PATH"))
	})
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		w.Header().Set("Content-Type", r.URL.Query().Get("type"))
		w.WriteHeader(code)
		_, _ = w.Write([]byte("origin.example"))
	})
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		rc := http.NewResponseController(w)
		send := func(s string, waitAck bool) bool {
			_, _ = io.WriteString(w, s)
			_ = rc.Flush()
			if !waitAck {
				return true
			}
			select {
			case <-env.sseAck:
				return true
			case <-time.After(10 * time.Second):
				_, _ = io.WriteString(w, "data: TIMEOUT waiting for the client\n\n")
				return false
			case <-r.Context().Done():
				return false
			}
		}
		_ = send("data: one\n\n", true) &&
			send("data: a BEGIN\n\n", false) &&
			send("data: END b\n\n", true) &&
			send("data: four\n\n", true)
	})
	origin := Origin(t, mux)

	dir := t.TempDir()
	for name, body := range map[string][]byte{"page.html": env.page, "video.mp4": env.video, "plain.html": []byte("<p>nothing to replace here</p>")} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env.caddy = StartCaddy(t, fmt.Sprintf(`
http://{$HOST}:{$HTTP_PORT} {
	handle /rp/* {
		substitute {%[1]s
		}
		reverse_proxy %[2]s
	}
	handle /files/* {
		substitute {%[1]s
		}
		uri strip_prefix /files
		root * %[3]s
		file_server
	}
	handle /gz/* {
		encode gzip
		substitute {%[1]s
		}
		uri replace /gz/ /rp/
		reverse_proxy %[2]s
	}
	handle /status/* {
		substitute {
			replace origin.example edge.example
			types text/html application/*
			status 2xx 404
		}
		reverse_proxy %[2]s
	}
	handle /sse {
		substitute {
			regex "BEGIN\n\ndata: END" JOINED
			types text/event-stream
		}
		reverse_proxy %[2]s
	}
}
https://localhost:{$HTTPS_PORT} {
	tls internal
	substitute {%[1]s
	}
	reverse_proxy %[2]s
}
`, substituteRules, origin, dir))
	return env
}

func getSubst(t *testing.T, client *http.Client, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	return fetchSubst(t, client, "GET", url, hdr)
}

// getSubstStatus is getSubst failing the test unless the status is status.
func getSubstStatus(t *testing.T, client *http.Client, url string, hdr map[string]string, status int) (*http.Response, string) {
	t.Helper()
	resp, body := getSubst(t, client, url, hdr)
	if resp.StatusCode != status {
		t.Fatalf("GET %s: status %d, want %d: %.200q", url, resp.StatusCode, status, body)
	}
	return resp, body
}

func fetchSubst(t *testing.T, client *http.Client, method, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return Do(t, client, req)
}

func TestSubstitute(t *testing.T) {
	env := startSubstitute(t)
	c := env.caddy
	client := c.Client()
	want := substituteExpected(env.page)

	t.Run("reverse_proxy decodes every known encoding", func(t *testing.T) {
		for _, enc := range []string{"identity", "gzip", "br", "zstd", "deflate"} {
			resp, body := getSubst(t, client, c.URL("/rp/enc/"+enc), map[string]string{"Accept-Encoding": "identity"})
			if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" {
				t.Errorf("%s: status %d, Content-Encoding %q", enc, resp.StatusCode, resp.Header.Get("Content-Encoding"))
			}
			if body != want {
				t.Errorf("%s: body not substituted as expected (%d bytes, want %d)", enc, len(body), len(want))
			}
		}
		resp, body := getSubstStatus(t, client, c.URL("/rp/enc/compress"), nil, 200)
		if resp.Header.Get("Content-Encoding") != "compress" || body != "origin.example raw" {
			t.Errorf("unknown encoding touched: %q %q", resp.Header.Get("Content-Encoding"), body)
		}
	})

	t.Run("encode compresses what substitute wrote", func(t *testing.T) {
		for _, enc := range []string{"identity", "br", "zstd"} {
			resp, body := getSubstStatus(t, client, c.URL("/gz/enc/"+enc), map[string]string{"Accept-Encoding": "gzip"}, 200)
			if resp.Header.Get("Content-Encoding") != "gzip" {
				t.Fatalf("%s: Content-Encoding %q, want gzip", enc, resp.Header.Get("Content-Encoding"))
			}
			zr, err := gzip.NewReader(strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			plain, err := io.ReadAll(zr)
			if err != nil || string(plain) != want {
				t.Errorf("%s: gzip body decodes to %d bytes (err %v), want the substituted page", enc, len(plain), err)
			}
		}
	})

	t.Run("file_server gives the same result as reverse_proxy", func(t *testing.T) {
		_, viaProxy := getSubstStatus(t, client, c.URL("/rp/page.html"), nil, 200)
		resp, viaFiles := getSubstStatus(t, client, c.URL("/files/page.html"), nil, 200)
		if viaFiles != want || viaProxy != want {
			t.Errorf("file_server %d bytes, reverse_proxy %d bytes, want %d", len(viaFiles), len(viaProxy), len(want))
		}
		if resp.Header.Get("Content-Length") != "" || !strings.HasPrefix(resp.Header.Get("Etag"), `W/"`) {
			t.Errorf("file_server headers: %v", resp.Header)
		}
		// The video is not substituted and keeps its length.
		resp, body := getSubstStatus(t, client, c.URL("/files/video.mp4"), nil, 200)
		if body != string(env.video) || resp.Header.Get("Content-Length") != strconv.Itoa(len(env.video)) {
			t.Errorf("video through file_server changed: %d bytes, Content-Length %q", len(body), resp.Header.Get("Content-Length"))
		}
	})

	t.Run("headers", func(t *testing.T) {
		resp, _ := getSubstStatus(t, client, c.URL("/rp/page.html"), nil, 200)
		if resp.Header.Get("Content-Length") != "" {
			t.Errorf("Content-Length %q kept", resp.Header.Get("Content-Length"))
		}
		if resp.Header.Get("Etag") != `W/"page-v1"` {
			t.Errorf("ETag %q, want W/\"page-v1\"", resp.Header.Get("Etag"))
		}
		if resp.Header.Get("Last-Modified") != "Fri, 02 Jan 2026 03:04:05 GMT" {
			t.Errorf("Last-Modified %q", resp.Header.Get("Last-Modified"))
		}
		// HEAD: the fields GET has (TestSubstituteHeadMirrorsGet).
		resp, body := fetchSubst(t, client, "HEAD", c.URL("/rp/page.html"), nil)
		if resp.Header.Get("Content-Length") != "" || resp.Header.Get("Etag") != `W/"page-v1"` || body != "" {
			t.Errorf("HEAD: %v, want GET's fields", resp.Header)
		}
		// 304 for the weak ETag the client was given.
		resp, body = getSubst(t, client, c.URL("/rp/page.html"), map[string]string{"If-None-Match": `W/"page-v1"`})
		if resp.StatusCode != 304 || body != "" {
			t.Errorf("conditional GET: %d %q, want 304", resp.StatusCode, body)
		}
		resp, body = getSubst(t, client, c.URL("/rp/empty"), nil)
		if resp.StatusCode != 204 || body != "" {
			t.Errorf("204: %d %q", resp.StatusCode, body)
		}
	})

	t.Run("types and status filters", func(t *testing.T) {
		for _, c2 := range []struct {
			path, want string
			status     int
		}{
			{"/status/200?type=text/html%3Bcharset=utf-8", "edge.example", 200},
			{"/status/201?type=application/json", "edge.example", 201},
			{"/status/404?type=text/html", "edge.example", 404},
			{"/status/500?type=text/html", "origin.example", 500},
			{"/status/200?type=text/css", "origin.example", 200},
			{"/status/200?type=image/png", "origin.example", 200},
		} {
			if _, body := getSubstStatus(t, client, c.URL(c2.path), nil, c2.status); body != c2.want {
				t.Errorf("%s: %q, want %q", c2.path, body, c2.want)
			}
		}
	})

	t.Run("once and placeholders", func(t *testing.T) {
		_, body := getSubstStatus(t, client, c.URL("/rp/page.html"), nil, 200)
		if !strings.HasPrefix(body, "<html><body>once-done ONCE\n") {
			t.Errorf("once: page starts %q", body[:30])
		}
		for _, p := range []string{"/rp/placeholder/a", "/rp/placeholder/$1"} {
			if _, body := getSubstStatus(t, client, c.URL(p), nil, 200); body != "at "+p {
				t.Errorf("placeholder: %q, want %q", body, "at "+p)
			}
		}
	})

	t.Run("ranges", func(t *testing.T) {
		for _, prefix := range []string{"/rp", "/files"} {
			resp, body := getSubst(t, client, c.URL(prefix+"/page.html"), map[string]string{"Range": "bytes=0-99"})
			if resp.StatusCode != 200 || body != want || resp.Header.Get("Content-Range") != "" {
				t.Errorf("%s page range: %d, %d bytes, Content-Range %q: want the whole substituted 200", prefix, resp.StatusCode, len(body), resp.Header.Get("Content-Range"))
			}
			resp, body = getSubst(t, client, c.URL(prefix+"/page.html"), map[string]string{"Range": "bytes=0-9,20-29"})
			if resp.StatusCode != 200 || body != want {
				t.Errorf("%s multi-range page: %d, %d bytes", prefix, resp.StatusCode, len(body))
			}
			resp, body = getSubst(t, client, c.URL(prefix+"/video.mp4"), map[string]string{"Range": "bytes=100-199"})
			if resp.StatusCode != 206 || body != string(env.video[100:200]) {
				t.Errorf("%s video range: %d %d bytes, want 206 of 100", prefix, resp.StatusCode, len(body))
			}
		}
	})

	t.Run("memo", func(t *testing.T) {
		hits := func() int {
			return int(counterValue(t, c.Metrics(), "caddy_substitute_memo_hits_total"))
		}
		_, first := getSubstStatus(t, client, c.URL("/rp/plain.html?v=1"), nil, 200)
		before := hits()
		_, second := getSubstStatus(t, client, c.URL("/rp/plain.html?v=1"), nil, 200)
		if hits() != before+1 {
			t.Errorf("memo hits went from %d to %d, want one more", before, hits())
		}
		if first != second || second != "<p>nothing to replace here</p>" {
			t.Errorf("memo changed output: %q then %q", first, second)
		}
		// A body that rules matched is not remembered: scanned in full
		// each time, no memo hit.
		_, a := getSubstStatus(t, client, c.URL("/files/page.html"), nil, 200)
		before = hits()
		_, b := getSubstStatus(t, client, c.URL("/files/page.html"), nil, 200)
		if a != want || b != want {
			t.Error("memo changed the output of a matching page")
		}
		if hits() != before {
			t.Errorf("memo hits went from %d to %d for a page that rules matched, want none", before, hits())
		}
	})

	t.Run("server-sent events", func(t *testing.T) {
		resp, err := client.Get(c.URL("/sse"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET /sse: status %d", resp.StatusCode)
		}
		r := bufio.NewReader(resp.Body)
		readEvent := func() string {
			var ev strings.Builder
			for {
				line, err := r.ReadString('\n')
				ev.WriteString(line)
				if err != nil || line == "\n" {
					return ev.String()
				}
			}
		}
		// The origin sends the next event only after we acknowledge this
		// one: if substitute held it back, the origin would time out.
		if ev := readEvent(); ev != "data: one\n\n" {
			t.Fatalf("first event %q", ev)
		}
		env.sseAck <- struct{}{}
		if ev := readEvent(); ev != "data: a JOINED b\n\n" {
			t.Fatalf("spanning event %q, want it joined", ev)
		}
		env.sseAck <- struct{}{}
		if ev := readEvent(); ev != "data: four\n\n" {
			t.Fatalf("last event %q", ev)
		}
		env.sseAck <- struct{}{}
	})

	t.Run("HTTP/3", func(t *testing.T) {
		c.WaitHTTPS(t)
		h3 := c.H3Client()
		for _, enc := range []string{"identity", "br"} {
			resp, body := getSubstStatus(t, h3, c.HTTPSURL("/rp/enc/"+enc), nil, 200)
			if resp.ProtoMajor != 3 {
				t.Fatalf("protocol %s, want HTTP/3", resp.Proto)
			}
			if body != want {
				t.Errorf("h3 %s: body not substituted (%d bytes, want %d)", enc, len(body), len(want))
			}
		}
		resp, body := getSubst(t, h3, c.HTTPSURL("/rp/video.mp4"), map[string]string{"Range": "bytes=0-9"})
		if resp.StatusCode != 206 || body != string(env.video[:10]) {
			t.Errorf("h3 video range: %d %q", resp.StatusCode, body)
		}
		resp, body = getSubst(t, h3, c.HTTPSURL("/rp/page.html"), map[string]string{"Range": "bytes=0-9"})
		if resp.StatusCode != 200 || body != want {
			t.Errorf("h3 page range: %d, %d bytes, want the whole substituted 200", resp.StatusCode, len(body))
		}
		resp, body = getSubstStatus(t, client, c.HTTPSURL("/rp/page.html"), nil, 200)
		if resp.ProtoMajor != 2 || body != want {
			t.Errorf("h2: %s, %d bytes", resp.Proto, len(body))
		}
	})
}

func TestSubstituteRefusals(t *testing.T) {
	for _, c := range []struct{ name, block, want string }{
		{"bad regex", "replace a b\n\t\tregex \"id-(\" x", `rule 2: regex "id-(": error parsing regexp`},
		{"empty match", "regex \"x*\" y", `rule 1: regex "x*": matches the empty string`},
		{"unknown rule option", "replace a b twice", `rule 1: replace "a": unknown option "twice"`},
		{"unknown option", "replace a b\n\t\tcolour blue", `substitute: unknown subdirective "colour"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "Caddyfile")
			cfg := fmt.Sprintf("http://127.0.0.1:8080 {\n\tsubstitute {\n\t\t%s\n\t}\n\trespond ok\n}\n", c.block)
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(caddyBinary, "validate", "--config", path, "--adapter", "caddyfile")
			cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("caddy validate accepted:\n%s", cfg)
			}
			if !strings.Contains(strings.ReplaceAll(string(out), `\"`, `"`), c.want) {
				t.Errorf("caddy validate said\n%s\nwant a message containing %q", out, c.want)
			}
		})
	}
	// /load refuses too, and the running config keeps serving.
	c := StartCaddy(t, "http://{$HOST}:{$HTTP_PORT} {\n\tsubstitute {\n\t\treplace hello bye\n\t}\n\theader Content-Type text/plain\n\trespond \"hello\"\n}\n")
	status, body := c.Load("http://{$HOST}:{$HTTP_PORT} {\n\tsubstitute {\n\t\tregex \"(\" x\n\t}\n\trespond ok\n}\n")
	if status == 200 || !strings.Contains(body, "rule 1") {
		t.Errorf("/load of a bad regex: %d %s", status, body)
	}
	if _, got := getSubstStatus(t, c.Client(), c.URL("/"), nil, 200); got != "bye" {
		t.Errorf("after the refused load the old config answers %q, want bye", got)
	}
}
