package integration

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"testing"
)

// hintsOrigin serves HTML pages with Link fields: /page/* public ones
// (same-site, to the allowed CDN, and cross-site), /cookie/* with
// Set-Cookie, /private/* Cache-Control: private, /early/* its own 103
// before the page.
func hintsOrigin(t *testing.T) string {
	return Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if strings.HasPrefix(r.URL.Path, "/early/") {
			h.Set("Link", "</early.js>; rel=preload; as=script")
			w.WriteHeader(http.StatusEarlyHints)
			h.Del("Link")
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Add("Link", "</a.css>; rel=preload; as=style")
		h.Add("Link", "</b.js>; rel=modulepreload")
		h.Add("Link", "<https://cdn.example.net/c.js>; rel=preload; as=script")
		h.Add("Link", "<https://tracker.example.org/t.js>; rel=preload; as=script")
		switch {
		case strings.HasPrefix(r.URL.Path, "/cookie/"):
			h.Set("Set-Cookie", "session=per-user")
		case strings.HasPrefix(r.URL.Path, "/private/"):
			h.Set("Cache-Control", "private, max-age=60")
		}
		io.WriteString(w, "<!doctype html><title>page</title>")
	}))
}

// The early_hints directives are written first in each block: the default
// order must still put them after throttle and client_ip.
const hintsSites = `
https://localhost:{$HTTPS_PORT} {
	tls internal
	handle /throttled/* {
		early_hints {
			link /hand.css preload style
		}
		throttle {
			zone per_ip {
				rate 2/1m
			}
		}
		reverse_proxy %[1]s
	}
	handle /rejected/* {
		early_hints {
			link /hand.css preload style
		}
		client_ip {
			trusted_proxies 192.0.2.0/24
			untrusted reject
		}
		reverse_proxy %[1]s
	}
	handle {
		early_hints {
			allow_origin https://cdn.example.net
		}
		reverse_proxy %[1]s
	}
}`

// hinted is what a client saw: the 103s' Link fields, the final status
// and Link fields.
type hinted struct {
	early  [][]string
	status int
	links  []string
}

func navigate(t *testing.T, client *http.Client, url string, nav bool) hinted {
	t.Helper()
	var mu sync.Mutex
	var got hinted
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		if code == http.StatusEarlyHints {
			mu.Lock()
			got.early = append(got.early, slices.Clone(h["Link"]))
			mu.Unlock()
		}
		return nil
	}}
	req, _ := http.NewRequest("GET", url, nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	req.Header.Set("Accept-Encoding", "gzip, deflate, br, zstd")
	if nav {
		req.Header.Set("Sec-Fetch-Mode", "navigate")
		req.Header.Set("Sec-Fetch-Dest", "document")
	}
	resp, _ := Do(t, client, req)
	mu.Lock()
	defer mu.Unlock()
	got.status, got.links = resp.StatusCode, resp.Header["Link"]
	return got
}

// TestEarlyHintsGoClients: through a real Caddy in front of a real origin,
// Go's HTTP/2 and quic-go's HTTP/3 clients: the first navigation to a page
// learns it (no 103), the next gets a 103 with the same-site and allowed
// links before the page; HTTP/1.1, non-navigations, per-user pages,
// cross-site links, throttle's 429 and client_ip's 403 get no hint.
func TestEarlyHintsGoClients(t *testing.T) {
	origin := hintsOrigin(t)
	c := StartCaddy(t, fmt.Sprintf(hintsSites, origin))
	c.WaitHTTPS(t)
	h2, h3 := c.Client(), c.H3Client()
	h1 := c.Client()
	h1.Transport.(*http.Transport).ForceAttemptHTTP2 = false
	h1.Transport.(*http.Transport).TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	want := []string{"</a.css>; rel=preload; as=style", "</b.js>; rel=modulepreload", "<https://cdn.example.net/c.js>; rel=preload; as=script"}

	for _, tc := range []struct {
		name   string
		client *http.Client
		proto  int
	}{{"h2", h2, 2}, {"h3", h3, 3}} {
		t.Run(tc.name+" learns then hints", func(t *testing.T) {
			url := c.HTTPSURL("/page/" + tc.name)
			first := navigate(t, tc.client, url, true)
			if first.status != 200 || len(first.early) != 0 {
				t.Fatalf("first navigation: %+v; want a 200 and no 103", first)
			}
			second := navigate(t, tc.client, url+"?utm=x", true)
			if second.status != 200 || len(second.early) != 1 || !slices.Equal(second.early[0], want) {
				t.Fatalf("second navigation: 103s %q; want one with %q", second.early, want)
			}
			// The final response's Link fields are the origin's, all four.
			if len(second.links) != 4 {
				t.Errorf("final Link fields %q; want the origin's four", second.links)
			}
			for _, l := range second.early[0] {
				if strings.Contains(l, "tracker.example.org") {
					t.Errorf("cross-site link hinted: %q", l)
				}
			}
		})
	}

	t.Run("h1 gets none", func(t *testing.T) {
		url := c.HTTPSURL("/page/h1")
		navigate(t, h2, url, true) // learned over h2
		if got := navigate(t, h2, url, true); len(got.early) != 1 {
			t.Fatalf("h2 control got %q", got.early)
		}
		if got := navigate(t, h1, url, true); got.status != 200 || len(got.early) != 0 {
			t.Fatalf("HTTP/1.1 navigation: %+v; want no 103", got)
		}
	})

	t.Run("non-navigation gets none", func(t *testing.T) {
		url := c.HTTPSURL("/page/fetch")
		navigate(t, h2, url, true)
		if got := navigate(t, h2, url, false); got.status != 200 || len(got.early) != 0 {
			t.Fatalf("GET without Sec-Fetch-Mode: navigate: %+v; want no 103", got)
		}
	})

	t.Run("per-user pages never learned", func(t *testing.T) {
		for _, path := range []string{"/cookie/x", "/private/x"} {
			for i := range 3 {
				if got := navigate(t, h2, c.HTTPSURL(path), true); got.status != 200 || len(got.early) != 0 {
					t.Fatalf("%s navigation %d: %+v; want no 103", path, i, got)
				}
			}
		}
	})

	t.Run("origin 103 after the PoP's", func(t *testing.T) {
		url := c.HTTPSURL("/early/x")
		first := navigate(t, h2, url, true)
		if len(first.early) != 1 || !slices.Equal(first.early[0], []string{"</early.js>; rel=preload; as=script"}) {
			t.Fatalf("first: the origin's 103 not passed on: %q", first.early)
		}
		// The PoP's 103 first, with the origin's 103 link and the page's;
		// then the origin's own, which adds nothing, passed on unchanged.
		second := navigate(t, h2, url, true)
		if len(second.early) != 2 || !slices.Contains(second.early[0], "</early.js>; rel=preload; as=script") || !slices.Contains(second.early[0], want[0]) ||
			!slices.Equal(second.early[1], []string{"</early.js>; rel=preload; as=script"}) {
			t.Fatalf("second: 103s %q; want the PoP's, with the origin's 103 link and the page's, then the origin's unchanged", second.early)
		}
	})

	t.Run("throttle 429 gets none", func(t *testing.T) {
		url := c.HTTPSURL("/throttled/x")
		for i, wantStatus := range []int{200, 200, 429} {
			got := navigate(t, h2, url, true)
			if got.status != wantStatus {
				t.Fatalf("request %d: status %d, want %d", i, got.status, wantStatus)
			}
			if hints := len(got.early) > 0; hints != (wantStatus == 200) {
				t.Fatalf("request %d (%d): 103s %q", i, got.status, got.early)
			}
		}
	})

	t.Run("client_ip reject gets none", func(t *testing.T) {
		for _, client := range []*http.Client{h2, h3} {
			if got := navigate(t, client, c.HTTPSURL("/rejected/x"), true); got.status != 403 || len(got.early) != 0 {
				t.Fatalf("rejected navigation: %+v; want a 403 without 103", got)
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		m := c.Metrics()
		for _, s := range []string{"caddy_early_hints_hints_sent_total", "caddy_early_hints_learned_total"} {
			if v := counterValue(t, m, s); v < 1 {
				t.Errorf("%s = %v", s, v)
			}
		}
	})
}
