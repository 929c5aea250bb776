package integration

import (
	"net/http"
	"strconv"
	"testing"
)

// TestSubstituteNoTransformPassesUntouched: issue 26 item 9. substitute
// rewrote responses that carry Cache-Control: no-transform (RFC 9110 §7.7),
// which encode and dictionary honour, and which subresource-integrity
// hashes rely on. Such a response must reach the client byte for byte as
// the origin sent it (body, Content-Length, strong ETag, Content-Encoding),
// over HTTP/1.1 and HTTP/2, and count as
// responses_total{result="no_transform"}; a caller's own no-transform on
// the request must not switch the rules off.
func TestSubstituteNoTransformPassesUntouched(t *testing.T) {
	script := []byte("fetch('https://origin.example/api') // integrity-hashed\n")
	gz := substituteEncode(t, "gzip", script)
	origin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/javascript")
		h.Set("ETag", `"app-v1"`)
		body := script
		switch r.URL.Path {
		case "/app.js":
			h.Set("Cache-Control", "public, max-age=31536000, no-transform")
		case "/app.js.gz":
			h.Set("Cache-Control", "no-transform")
			h.Set("Content-Encoding", "gzip")
			body = gz
		case "/plain.js":
		default:
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	c, protos := startSubstituteH1H2(t, origin)
	client := c.Client()
	for _, proto := range protos {
		for _, tc := range []struct {
			path, enc string
			body      []byte
		}{{"/app.js", "", script}, {"/app.js.gz", "gzip", gz}} {
			t.Run(proto.name+tc.path, func(t *testing.T) {
				resp, body := getSubstStatus(t, client, proto.url(tc.path), map[string]string{"Accept-Encoding": brotliBrowserAcceptEncoding}, 200)
				if body != string(tc.body) {
					t.Errorf("body %q, want the origin's %q", body, tc.body)
				}
				for k, want := range map[string]string{"Content-Length": strconv.Itoa(len(tc.body)), "Etag": `"app-v1"`, "Content-Encoding": tc.enc} {
					if got := resp.Header.Get(k); got != want {
						t.Errorf("%s %q, want the origin's %q", k, got, want)
					}
				}
			})
		}
	}
	if n := counterValue(t, c.Metrics(), `caddy_substitute_responses_total{result="no_transform"}`); n != 4 {
		t.Errorf(`responses_total{result="no_transform"} %v, want 4`, n)
	}
	_, body := getSubstStatus(t, client, c.URL("/plain.js"), map[string]string{"Cache-Control": "no-transform"}, 200)
	if body != "fetch('https://edge.example/api') // integrity-hashed\n" {
		t.Errorf("request with Cache-Control: no-transform: %q, want it substituted", body)
	}
}
