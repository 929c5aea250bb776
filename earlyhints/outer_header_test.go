package earlyhints

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
)

// TestHandlerLearnsWhatTheClientReceives: Caddy's header handler runs
// before early_hints, so its writer is outside this handler's and its
// deferred ops change the header after the origin wrote it. A response
// made per-user on the way out (header ?Cache-Control private, header
// >Cache-Control private, header >Vary Cookie, a deferred Set-Cookie) is
// not learned, by whichever path the origin sends its header; the same
// chain with a harmless op learns (the control).
func TestHandlerLearnsWhatTheClientReceives(t *testing.T) {
	set := func(field, value string) *headers.HeaderOps {
		return &headers.HeaderOps{Set: http.Header{field: {value}}}
	}
	for _, tc := range []struct {
		name  string
		ops   *headers.RespHeaderOps
		learn bool
	}{
		{"?Cache-Control private", &headers.RespHeaderOps{HeaderOps: set("Cache-Control", "private"),
			Require: &caddyhttp.ResponseMatcher{Headers: http.Header{"Cache-Control": nil}}}, false},
		{">Cache-Control private", &headers.RespHeaderOps{HeaderOps: set("Cache-Control", "private"), Deferred: true}, false},
		{">Vary Cookie", &headers.RespHeaderOps{HeaderOps: set("Vary", "Cookie"), Deferred: true}, false},
		{"Set-Cookie defer", &headers.RespHeaderOps{HeaderOps: set("Set-Cookie", "edge=1"), Deferred: true}, false},
		{"-Link defer", &headers.RespHeaderOps{HeaderOps: &headers.HeaderOps{Delete: []string{"Link"}}, Deferred: true}, false},
		{"control: >X-Frame-Options DENY", &headers.RespHeaderOps{HeaderOps: set("X-Frame-Options", "DENY"), Deferred: true}, true},
	} {
		for _, path := range []string{"WriteHeader", "Write", "ReadFrom", "Flush"} {
			h := newHandler(t, &Handler{})
			hdr := &headers.Handler{Response: tc.ops}
			if err := hdr.Provision(caddy.Context{}); err != nil {
				t.Fatal(err)
			}
			r := navigation("/", 2)
			r = r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
			origin := caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
				w.Header().Set("Content-Type", "text/html")
				w.Header().Set("Link", "</user-42-avatar.png>; rel=preload; as=image")
				return writeBy(w, path)
			})
			rec := &flushRecorder{&recorder{hdr: http.Header{}}}
			err := hdr.ServeHTTP(rec, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				return h.ServeHTTP(w, r, origin)
			}))
			if err != nil {
				t.Fatal(err)
			}
			if got := h.store.len() == 1; got != tc.learn {
				t.Errorf("%s, origin by %s: learned %v, want %v (the client got %v)", tc.name, path, got, tc.learn, rec.hdr)
			}
		}
	}
}

// writeBy sends the origin's header the way named: WriteHeader, a Write
// first, io.Copy (ReadFrom, as file_server's sendfile) or a flush first.
func writeBy(w http.ResponseWriter, how string) error {
	var err error
	switch how {
	case "WriteHeader":
		w.WriteHeader(200)
	case "Write":
		_, err = w.Write([]byte("<html>"))
	case "ReadFrom":
		_, err = w.(io.ReaderFrom).ReadFrom(strings.NewReader("<html>"))
	case "Flush":
		err = http.NewResponseController(w).Flush()
	default:
		panic(how)
	}
	return err
}
