package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// substituteHeaderFields is the headers line of a site cloned under
// another host name.
const substituteHeaderFields = "Location Content-Location Link Refresh Set-Cookie Content-Security-Policy"

// TestSubstituteHeaders: through a real Caddy in front of a real origin,
// over HTTP/1.1, HTTP/2 and HTTP/3, `headers` rewrites the named response
// fields on redirects (301, 302), on a 304, on HEAD as on GET, on a type
// whose body is not substituted, and value by value (two Set-Cookie fields
// stay two); an upstream writing odd-case field names, or one field many
// times, does not get past it.
func TestSubstituteHeaders(t *testing.T) {
	modTime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	page := []byte(`<a href="https://origin.example/about">about</a>`)
	origin := Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		switch r.URL.Path {
		case "/old":
			http.Redirect(w, r, "http://origin.example/new", http.StatusMovedPermanently)
		case "/login":
			h.Set("Location", "https://origin.example/login?next=https%3A%2F%2Forigin.example%2F")
			w.WriteHeader(http.StatusFound)
		case "/page", "/image":
			h.Set("Content-Type", "text/html; charset=utf-8")
			if r.URL.Path == "/image" {
				h.Set("Content-Type", "image/png")
			}
			h.Set("ETag", `"page-v1"`)
			h.Set("Content-Location", "https://origin.example/page.en")
			h.Add("Link", "<https://origin.example/app.css>; rel=preload; as=style")
			h.Add("Link", "<https://origin.example/page>; rel=canonical")
			h.Set("Refresh", "30; url=https://origin.example/page?fresh")
			h.Add("Set-Cookie", "sid=1; Domain=origin.example; Path=/; Secure")
			h.Add("Set-Cookie", "pref=a,b; Domain=.origin.example")
			h.Set("Content-Security-Policy", "default-src 'self' https://origin.example https://*.origin.example; img-src https://cdn.other.example")
			http.ServeContent(w, r, "", modTime, bytes.NewReader(page))
		default:
			http.NotFound(w, r)
		}
	}))
	raw := rawOrigin(t, "HTTP/1.1 302 Found\r\n"+
		"lOcAtIoN: https://origin.example/odd\r\n"+
		"set-cookie: a=1; Domain=origin.example\r\n"+
		"SET-COOKIE: b=2; Domain=origin.example\r\n"+
		"Set-Cookie: c=3; Domain=origin.example\r\n"+
		"X-Big: "+strings.Repeat("origin.example ", 4000)+"\r\n"+
		"Content-Length: 0\r\nConnection: close\r\n\r\n")
	// The operator's deferred field is set as the response leaves
	// substitute: it is kept as written.
	site := fmt.Sprintf(`
	header /login >Refresh "0; url=https://origin.example/operator"
	substitute {
		replace origin.example clone.example
		headers %s
	}
	reverse_proxy /raw %s
	reverse_proxy %s`, substituteHeaderFields, raw, origin)
	c := StartCaddy(t, "http://{$HOST}:{$HTTP_PORT} {"+site+"\n}\nhttps://localhost:{$HTTPS_PORT} {\n\ttls internal"+site+"\n}")
	c.WaitHTTPS(t)
	h3 := c.H3Client()
	h3.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse } // never dial the clone's name
	protos := []struct {
		name   string
		client *http.Client
		url    func(string) string
	}{{"HTTP/1.1", c.Client(), c.URL}, {"HTTP/2", c.Client(), c.HTTPSURL}, {"HTTP/3", h3, c.HTTPSURL}}
	browser := map[string]string{"Accept-Encoding": brotliBrowserAcceptEncoding}
	wantPage := http.Header{
		"Content-Location":        {"https://clone.example/page.en"},
		"Link":                    {"<https://clone.example/app.css>; rel=preload; as=style", "<https://clone.example/page>; rel=canonical"},
		"Refresh":                 {"30; url=https://clone.example/page?fresh"},
		"Set-Cookie":              {"sid=1; Domain=clone.example; Path=/; Secure", "pref=a,b; Domain=.clone.example"},
		"Content-Security-Policy": {"default-src 'self' https://clone.example https://*.clone.example; img-src https://cdn.other.example"},
	}
	expect := func(t *testing.T, resp *http.Response, status int, want http.Header) {
		t.Helper()
		if resp.StatusCode != status {
			t.Fatalf("status %d, want %d", resp.StatusCode, status)
		}
		for k, v := range want {
			if got := resp.Header[k]; !slices.Equal(got, v) {
				t.Errorf("%s: %q, want %q", k, got, v)
			}
		}
	}
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			t.Run("301 Location", func(t *testing.T) {
				resp, _ := fetchSubst(t, p.client, "GET", p.url("/old"), browser)
				expect(t, resp, 301, http.Header{"Location": {"http://clone.example/new"}})
			})
			t.Run("302 Location", func(t *testing.T) {
				resp, _ := fetchSubst(t, p.client, "GET", p.url("/login"), browser)
				// Each occurrence, the encoded one too, as in a body.
				expect(t, resp, 302, http.Header{
					"Location": {"https://clone.example/login?next=https%3A%2F%2Fclone.example%2F"},
					"Refresh":  {"0; url=https://origin.example/operator"},
				})
			})
			t.Run("200 page", func(t *testing.T) {
				resp, body := fetchSubst(t, p.client, "GET", p.url("/page"), browser)
				expect(t, resp, 200, wantPage)
				if body != `<a href="https://clone.example/about">about</a>` {
					t.Errorf("body %q", body)
				}
			})
			t.Run("HEAD as GET", func(t *testing.T) {
				get, _ := fetchSubst(t, p.client, "GET", p.url("/page"), browser)
				head, _ := fetchSubst(t, p.client, "HEAD", p.url("/page"), browser)
				expect(t, head, 200, wantPage)
				g, h := get.Header.Clone(), head.Header.Clone()
				for _, hdr := range []http.Header{g, h} {
					hdr.Del("Date")
					hdr.Del("Content-Length") // GET may count its small body; HEAD announces none
				}
				if !maps.EqualFunc(g, h, slices.Equal) {
					t.Errorf("HEAD header\n%v\ndiffers from GET's\n%v", h, g)
				}
			})
			t.Run("304", func(t *testing.T) {
				hdr := maps.Clone(browser)
				hdr["If-None-Match"] = `W/"page-v1"`
				resp, _ := fetchSubst(t, p.client, "GET", p.url("/page"), hdr)
				expect(t, resp, 304, wantPage)
			})
			t.Run("body not substituted", func(t *testing.T) {
				resp, body := fetchSubst(t, p.client, "GET", p.url("/image"), browser)
				expect(t, resp, 200, wantPage)
				if body != string(page) {
					t.Errorf("image body %q changed", body)
				}
			})
			t.Run("odd-case and repeated fields", func(t *testing.T) {
				resp, _ := fetchSubst(t, p.client, "GET", p.url("/raw"), browser)
				expect(t, resp, 302, http.Header{
					"Location":   {"https://clone.example/odd"},
					"Set-Cookie": {"a=1; Domain=clone.example", "b=2; Domain=clone.example", "c=3; Domain=clone.example"},
				})
				if !strings.HasPrefix(resp.Header.Get("X-Big"), "origin.example ") {
					t.Errorf("X-Big, not named, was rewritten")
				}
			})
		})
	}
	if n := counterValue(t, c.Metrics(), `caddy_substitute_header_fields_total{result="rewritten"}`); n < 3*(2+5*4) {
		t.Errorf("header_fields_total{result=rewritten} = %v, want at least %d", n, 3*(2+5*4))
	}
}

// rawOrigin answers every connection with response, byte for byte (field
// names as written, which net/http's server would canonicalize), and
// returns its address.
func rawOrigin(t *testing.T, response string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(conn)
				for { // the request's header
					line, err := br.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				_, _ = conn.Write([]byte(response))
			}()
		}
	}()
	return ln.Addr().String()
}
