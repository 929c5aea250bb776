package substitute

import (
	"net/http"
	"strings"
	"testing"
)

// BenchmarkHandlerHeaders: the cost of header rewriting, beside today's
// handler (no headers named) in one run. "absent" names the six fields a
// clone needs on responses that carry none of them: it must cost nothing.
// "present" carries all six, each needing a rewrite.
//
//	go test -run '^$' -bench BenchmarkHandlerHeaders -count 6 ./substitute/
func BenchmarkHandlerHeaders(b *testing.B) {
	rules := []Rule{{Find: "origin.example", Replace: "clone.example"}, {Find: `id-(\d+)`, Regex: true, Replace: "n$1"}}
	common := map[string]string{"Content-Type": "text/html; charset=utf-8", "Cache-Control": "max-age=60", "Etag": `"v1"`,
		"Vary": "Accept-Encoding", "Date": "Mon, 02 Jan 2006 15:04:05 GMT", "Server": "origin", "X-Request-Id": "abc"}
	present := map[string]string{"Location": "https://origin.example/new", "Content-Location": "/origin.example",
		"Link": "<https://origin.example/app.js>; rel=preload; as=script", "Refresh": "0; url=https://origin.example/",
		"Set-Cookie": "a=1; Domain=origin.example", "Content-Security-Policy": "default-src 'self' https://origin.example"}
	page := []byte(strings.Repeat(`<p>a page of the site, <a href="/x">link</a></p>`, 40)) // 2 KB
	for _, resp := range []struct {
		name   string
		status int
		body   []byte
	}{{"page", 200, page}, {"redirect", 302, nil}} {
		for _, c := range []struct {
			name    string
			headers []string
			fields  map[string]string
		}{{"today", nil, nil}, {"absent", cloneFields, nil}, {"present", cloneFields, present}} {
			b.Run(resp.name+"/"+c.name, func(b *testing.B) {
				h := provision(b, &Handler{Rules: rules, Memo: MemoOff, Headers: c.headers})
				hdr := map[string]string{}
				for k, v := range common {
					hdr[k] = v
				}
				for k, v := range c.fields {
					hdr[k] = v
				}
				next := asCaddy(origin(resp.status, hdr, resp.body, 32<<10))
				r := request("GET", "/")
				w := &discardWriter{hdr: http.Header{}}
				b.ReportAllocs()
				for b.Loop() {
					clear(w.hdr)
					if err := h.ServeHTTP(w, r, next); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkRewriteHeadersAbsent is the hook alone on a response lacking
// every named field (seven usual fields): all that naming fields adds to
// such a response, one pass over the field names.
//
//	go test -run '^$' -bench BenchmarkRewriteHeadersAbsent -count 6 ./substitute/
func BenchmarkRewriteHeadersAbsent(b *testing.B) {
	h := provision(b, &Handler{Rules: []Rule{{Find: "origin.example", Replace: "clone.example"}}, Memo: MemoOff, Headers: cloneFields})
	rw := h.getWriter(&discardWriter{hdr: http.Header{}}, request("GET", "/"))
	defer h.putWriter(rw)
	hdr := http.Header{}
	for k, v := range map[string]string{"Content-Type": "text/html; charset=utf-8", "Cache-Control": "max-age=60", "Etag": `"v1"`,
		"Vary": "Accept-Encoding", "Date": "Mon, 02 Jan 2006 15:04:05 GMT", "Server": "origin", "X-Request-Id": "abc"} {
		hdr.Set(k, v)
	}
	b.ReportAllocs()
	for b.Loop() {
		rw.rewriteHeaders(hdr, false)
	}
}
