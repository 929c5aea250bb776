package earlyhints

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// discard is a ResponseWriter that keeps nothing but a header map, cleared
// between requests as a new response would start empty.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkHandler: the handler off (next called directly) beside on, in
// one run, for requests that get no hint: an asset GET over HTTP/2 (not a
// navigation, its response not HTML), and a navigation to a page with
// nothing learned whose response is per-user (Set-Cookie). The store
// holds 10000 other paths.
func BenchmarkHandler(b *testing.B) {
	asset := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header()["Content-Type"] = []string{"text/javascript"}
		w.Header()["Content-Length"] = []string{"2"}
		w.WriteHeader(200)
		_, err := w.Write([]byte("ok"))
		return err
	})
	perUser := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header()["Content-Type"] = []string{"text/html"}
		w.Header()["Set-Cookie"] = []string{"s=1"}
		w.WriteHeader(200)
		_, err := w.Write([]byte("ok"))
		return err
	})
	h := &Handler{}
	h.learn = true
	h.store = newStore(defaultMaxPaths, defaultMaxBytes, time.Hour)
	for i := range defaultMaxPaths {
		h.store.put("pop.example /p"+string(rune('a'+i%26))+string(rune(i)), []string{"</a.js>; rel=preload"})
	}
	assetReq := httptest.NewRequest("GET", "https://pop.example/static/app.js", nil)
	assetReq.ProtoMajor, assetReq.TLS = 2, &tls.ConnectionState{HandshakeComplete: true}
	assetReq.Header.Set("Sec-Fetch-Mode", "no-cors")
	navReq := assetReq.Clone(assetReq.Context())
	navReq.URL.Path = "/account"
	navReq.Header.Set("Sec-Fetch-Mode", "navigate")
	w := &discard{h: http.Header{}}
	for _, tc := range []struct {
		name string
		r    *http.Request
		next caddyhttp.Handler
	}{{"asset", assetReq, asset}, {"navigation_unlearned", navReq, perUser}} {
		for _, mode := range []string{"off", "on"} {
			b.Run(tc.name+"/handler="+mode, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					clear(w.h)
					var err error
					if mode == "off" {
						err = tc.next.ServeHTTP(w, tc.r)
					} else {
						err = h.ServeHTTP(w, tc.r, tc.next)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
