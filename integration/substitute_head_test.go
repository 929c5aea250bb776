package integration

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestSubstituteHeadMirrorsGet: issue 26 item 8. HEAD must send the header
// fields GET would (RFC 9110 §9.3.2): substitute passed HEAD untouched, so
// HEAD announced the origin's Content-Length (280 where GET sends 289
// bytes) and strong ETag where GET's is weak. Through a real Caddy, over
// HTTP/1.1 and HTTP/2, for an identity and a compressed origin, a type
// that is not substituted, a no-transform response and a Range request,
// HEAD's header must equal GET's (Date aside), and a Content-Length on HEAD
// must be the length of GET's body.
func TestSubstituteHeadMirrorsGet(t *testing.T) {
	page := []byte("<p>see https://origin.example/about, twice: origin.example</p>\n")
	modTime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	gz := substituteEncode(t, "gzip", page)
	origin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "public, max-age=60")
		body := page
		switch r.URL.Path {
		case "/page.html":
			h.Set("Content-Type", "text/html; charset=utf-8")
			h.Set("ETag", `"page-v1"`)
		case "/page.gz":
			h.Set("Content-Type", "text/html; charset=utf-8")
			h.Set("Content-Encoding", "gzip")
			h.Set("ETag", `"page-v1-gzip"`)
			body = gz
		case "/video.mp4":
			h.Set("Content-Type", "video/mp4")
			h.Set("ETag", `"video-v1"`)
		case "/no-transform.html":
			h.Set("Content-Type", "text/html")
			h.Set("Cache-Control", "public, no-transform")
			h.Set("ETag", `"nt-v1"`)
		default:
			http.NotFound(w, r)
			return
		}
		// ServeContent answers HEAD as GET without the body, Range with 206.
		http.ServeContent(w, r, "", modTime, bytes.NewReader(body))
	}))
	c, protos := startSubstituteH1H2(t, origin)
	client := c.Client()
	for _, proto := range protos {
		for _, tc := range []struct {
			path string
			rng  bool
		}{
			{"/page.html", false},
			{"/page.html", true},
			{"/page.gz", false},
			{"/video.mp4", false},
			{"/no-transform.html", false},
		} {
			name := proto.name + tc.path
			if tc.rng {
				name += "/range"
			}
			t.Run(name, func(t *testing.T) {
				// As a browser asks: without Accept-Encoding, reverse_proxy
				// asks for gzip and decodes a GET's body itself, not a
				// HEAD's, whatever substitute does.
				hdr := map[string]string{"Accept-Encoding": brotliBrowserAcceptEncoding}
				if tc.rng {
					hdr["Range"] = "bytes=0-9"
				}
				get, getBody := fetchSubst(t, client, http.MethodGet, proto.url(tc.path), hdr)
				head, headBody := fetchSubst(t, client, http.MethodHead, proto.url(tc.path), hdr)
				if get.StatusCode != head.StatusCode || headBody != "" {
					t.Fatalf("GET %d, HEAD %d with %d body bytes", get.StatusCode, head.StatusCode, len(headBody))
				}
				// Content-Length: HEAD may leave out what is only known
				// once the body is generated (net/http counts a small GET
				// body it holds whole), but must never announce another
				// length than GET's body has (RFC 9110 §8.6).
				if cl := head.Header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(getBody)) {
					t.Errorf("HEAD announces Content-Length %s, GET sends %d bytes", cl, len(getBody))
				}
				g, h := get.Header.Clone(), head.Header.Clone()
				for _, k := range []string{"Date", "Content-Length"} {
					g.Del(k)
					h.Del(k)
				}
				if !maps.EqualFunc(g, h, slices.Equal) {
					t.Errorf("HEAD's header\n%v\ndiffers from GET's\n%v", h, g)
				}
			})
		}
	}
}

// substituteProto is one way to reach a Caddy: its name and its URL maker.
type substituteProto struct {
	name string
	url  func(string) string
}

// startSubstituteH1H2 starts a Caddy that substitutes origin.example with
// edge.example in front of origin, over HTTP/1.1 (plain) and HTTP/2 (TLS).
func startSubstituteH1H2(t *testing.T, origin string) (*Caddy, []substituteProto) {
	t.Helper()
	c := StartCaddy(t, fmt.Sprintf(`
http://{$HOST}:{$HTTP_PORT} {
	substitute {
		replace origin.example edge.example
	}
	reverse_proxy %[1]s
}
https://localhost:{$HTTPS_PORT} {
	tls internal
	substitute {
		replace origin.example edge.example
	}
	reverse_proxy %[1]s
}`, origin))
	c.WaitHTTPS(t)
	return c, []substituteProto{{"HTTP/1.1", c.URL}, {"HTTP/2", c.HTTPSURL}}
}

// TestSubstituteHeadHTTP3ZeroLength pins what docs/substitute.md says of
// HEAD over HTTP/3: for a response without Content-Length (a substituted
// body, or only `header -Content-Length`, no substitute), Caddy's HTTP/3
// server (quic-go) announces content-length: 0 to a HEAD, where HTTP/1.1
// and HTTP/2 announce none.
func TestSubstituteHeadHTTP3ZeroLength(t *testing.T) {
	page := []byte("<p>origin.example</p>\n")
	origin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", strconv.Itoa(len(page)))
		if r.Method != http.MethodHead {
			_, _ = w.Write(page)
		}
	}))
	c := StartCaddy(t, fmt.Sprintf(`
https://localhost:{$HTTPS_PORT} {
	tls internal
	handle /sub {
		substitute {
			replace origin.example edge.example
		}
		reverse_proxy %[1]s
	}
	handle /plain {
		header -Content-Length
		reverse_proxy %[1]s
	}
}`, origin))
	c.WaitHTTPS(t)
	for _, path := range []string{"/sub", "/plain"} {
		for _, proto := range []struct {
			name   string
			client *http.Client
			want   []string
		}{
			{"HTTP/2", c.Client(), nil},
			{"HTTP/3", c.H3Client(), []string{"0"}},
		} {
			req, err := http.NewRequest(http.MethodHead, c.HTTPSURL(path), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := proto.client.Do(req)
			if err != nil {
				t.Fatalf("%s HEAD %s: %v", proto.name, path, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Proto[:6] != proto.name[:6] {
				t.Fatalf("%s HEAD %s: %s %d", proto.name, path, resp.Proto, resp.StatusCode)
			}
			t.Logf("%s HEAD %s: Content-Length %q, ContentLength %d", proto.name, path, resp.Header["Content-Length"], resp.ContentLength)
			if got := resp.Header["Content-Length"]; !slices.Equal(got, proto.want) {
				t.Errorf("%s HEAD %s: Content-Length %q, want %q", proto.name, path, got, proto.want)
			}
		}
	}
}
