package substitute

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestNoTransformPassesUntouched: a response with Cache-Control:
// no-transform (RFC 9110 §7.7) passes with its body and header as the
// origin sent them, even compressed or as a 206, and is counted. The
// request's no-transform binds nothing (it addresses intermediaries, and a
// caller must not switch the rules off with it).
func TestNoTransformPassesUntouched(t *testing.T) {
	h := basicHandler(t)
	plain := []byte("see https://origin.example/id-7")
	gz := compress(t, "gzip", plain)
	for _, c := range []struct {
		name   string
		status int
		hdr    map[string]string
		body   []byte
	}{
		{"identity", 200, map[string]string{"Cache-Control": "public, no-transform"}, plain},
		{"gzip", 200, map[string]string{"Cache-Control": "max-age=60,NO-TRANSFORM", "Content-Encoding": "gzip"}, gz},
		{"206", 206, map[string]string{"Cache-Control": "no-transform", "Content-Range": "bytes 0-30/100"}, plain},
		{"304", 304, map[string]string{"Cache-Control": "no-transform"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			hdr := map[string]string{"Content-Type": "text/html", "Etag": `"v1"`, "Content-Length": "31", "Accept-Ranges": "bytes"}
			for k, v := range c.hdr {
				hdr[k] = v
			}
			before := noTransformCount()
			r := request("GET", "/")
			if c.status == 206 {
				r.Header.Set("Range", "bytes=0-30")
			}
			if c.status == 304 {
				r.Header.Set("If-None-Match", `W/"v1"`)
			}
			calls := 0
			rec := serve(t, h, r, func(w http.ResponseWriter, r *http.Request) {
				calls++
				origin(c.status, hdr, c.body, 7)(w, r)
			})
			if rec.Code != c.status || calls != 1 {
				t.Errorf("status %d after %d origin calls, want %d after 1", rec.Code, calls, c.status)
			}
			if got := rec.Body.String(); got != string(c.body) {
				t.Errorf("body %q, want it untouched %q", got, c.body)
			}
			for k, v := range hdr {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("%s: %q, want %q as the origin sent it", k, got, v)
				}
			}
			if got := noTransformCount(); got != before+1 {
				t.Errorf("responses_total{result=\"no_transform\"} went from %v to %v, want +1", before, got)
			}
		})
	}
	// The request's directive changes nothing.
	r := request("GET", "/")
	r.Header.Set("Cache-Control", "no-transform")
	rec := serve(t, h, r, origin(200, map[string]string{"Content-Type": "text/html"}, plain, 7))
	if got := rec.Body.String(); got != "see https://edge.example/n7" {
		t.Errorf("request with Cache-Control: no-transform: %q, want it substituted", got)
	}
}

// noTransformCount is responses_total{result="no_transform"}.
func noTransformCount() float64 {
	return testutil.ToFloat64(metrics.responses.WithLabelValues("no_transform"))
}
