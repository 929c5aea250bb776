package substitute

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"testing"
)

// TestHeadMirrorsGet: a HEAD answer carries the header fields the GET
// answer would (RFC 9110 §9.3.2): where GET's body is substituted, HEAD
// announces no Content-Length, no Accept-Ranges, no Content-Encoding and
// the weak ETag; where GET's passes untouched, so does HEAD's.
func TestHeadMirrorsGet(t *testing.T) {
	h := basicHandler(t)
	plain := []byte(`<a href="https://origin.example/x">id-42</a>`)
	gz := compress(t, "gzip", plain)
	cases := []struct {
		name string
		hdr  map[string]string
		body []byte
	}{
		{"identity", map[string]string{"Content-Type": "text/html"}, plain},
		{"gzip", map[string]string{"Content-Type": "text/html", "Content-Encoding": "gzip", "Etag": `"abc-gzip"`}, gz},
		{"other type", map[string]string{"Content-Type": "video/mp4"}, plain},
		{"no-transform", map[string]string{"Content-Type": "text/html", "Cache-Control": "no-transform"}, plain},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The origin answers HEAD as net/http and file_server do: the
			// GET's header, no body.
			next := func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Etag", `"abc"`)
				w.Header().Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
				w.Header().Set("Accept-Ranges", "bytes")
				w.Header().Set("Content-Length", strconv.Itoa(len(c.body)))
				for k, v := range c.hdr {
					w.Header().Set(k, v)
				}
				w.WriteHeader(http.StatusOK)
				if r.Method != http.MethodHead {
					_, _ = w.Write(c.body)
				}
			}
			get := serve(t, h, request("GET", "/"), next)
			head := serve(t, h, request("HEAD", "/"), next)
			if head.Code != get.Code {
				t.Errorf("HEAD status %d, GET %d", head.Code, get.Code)
			}
			if head.Body.Len() != 0 {
				t.Errorf("HEAD has a body: %q", head.Body.String())
			}
			if !maps.EqualFunc(get.Header(), head.Header(), slices.Equal) {
				t.Errorf("HEAD header\n%v\ndiffers from GET's\n%v", head.Header(), get.Header())
			}
		})
	}
}

// TestHeadRangeMirrorsGet: a HEAD with Range that gets a 206 of a
// substitutable type is asked again without Range, as GET is, so that it
// announces the full 200 GET would get.
func TestHeadRangeMirrorsGet(t *testing.T) {
	h := basicHandler(t)
	calls := 0
	next := rangeOrigin("text/html", "origin.example page", &calls)
	r := request("HEAD", "/")
	r.Header.Set("Range", "bytes=0-3")
	rec := serve(t, h, r, next)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Range") != "" || rec.Header().Get("Content-Length") != "" {
		t.Errorf("HEAD with Range: %d %v, want the 200 GET gets", rec.Code, rec.Header())
	}
}
