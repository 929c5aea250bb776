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
	"time"
)

// reviewOrigin answers every path with a public HTML page (no
// Cache-Control) whose one link names the page: the path it was asked
// for, or the X-Page field the PoP sets to the client's original path
// (a front controller reads the original URI the same way).
func reviewOrigin(t *testing.T) string {
	return Origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page := r.URL.Path
		if p := r.Header.Get("X-Page"); p != "" {
			page = p
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Link", fmt.Sprintf("<%s.png>; rel=preload; as=image", page))
		io.WriteString(w, "<!doctype html><title>page</title>")
	}))
}

// The header directives are Caddy's own, written before early_hints in
// each block and ordered before it by default: their writers are outside
// early_hints'.
const reviewSites = `
https://localhost:{$HTTPS_PORT} {
	tls internal
	handle /default-private/* {
		header ?Cache-Control "private"
		early_hints
		reverse_proxy %[1]s
	}
	handle /deferred-private/* {
		header >Cache-Control private
		early_hints
		reverse_proxy %[1]s
	}
	handle /vary-cookie/* {
		header >Vary Cookie
		early_hints
		reverse_proxy %[1]s
	}
	handle /set-cookie/* {
		header {
			Set-Cookie edge=1
			defer
		}
		early_hints
		reverse_proxy %[1]s
	}
	handle /control/* {
		header >X-Frame-Options DENY
		early_hints
		reverse_proxy %[1]s
	}
	handle /fc/* {
		rewrite * /index.php?{query}
		early_hints
		reverse_proxy %[1]s {
			header_up X-Page {http.request.orig_uri.path}
		}
	}
	handle /cookie-103-defer/* {
		header {
			Set-Cookie edge=1
			defer
		}
		early_hints {
			link /hand.css preload style
		}
		reverse_proxy %[1]s
	}
	handle /cookie-103-2xx/* {
		header {
			Set-Cookie edge=1
			match {
				status 2xx
			}
		}
		early_hints {
			link /hand.css preload style
		}
		reverse_proxy %[1]s
	}
	handle /h1/* {
		early_hints {
			http1 on
		}
		reverse_proxy %[1]s
	}
}`

// TestEarlyHintsReviewFindings: through a real Caddy, the reviewer's
// findings. A response the header directive makes per-user on its way
// out (?Cache-Control private, >Cache-Control private, >Vary Cookie, a
// deferred Set-Cookie) is not learned: a second caller's navigation gets
// no 103 with the first one's link (a harmless deferred op still
// learns). Behind a front controller (rewrite to /index.php) each page
// keeps its own links. With http1 on, HTTP/1.1 gets the 103 and
// HTTP/1.0 never does.
func TestEarlyHintsReviewFindings(t *testing.T) {
	origin := reviewOrigin(t)
	c := StartCaddy(t, fmt.Sprintf(reviewSites, origin))
	c.WaitHTTPS(t)
	h2 := c.Client()

	for _, tc := range []struct {
		prefix string
		learns bool
	}{
		{"/default-private/", false},
		{"/deferred-private/", false},
		{"/vary-cookie/", false},
		{"/set-cookie/", false},
		{"/control/", true},
	} {
		t.Run(strings.Trim(tc.prefix, "/"), func(t *testing.T) {
			url := c.HTTPSURL(tc.prefix + "user-42")
			first := navigate(t, h2, url, true)
			if first.status != 200 || len(first.early) != 0 {
				t.Fatalf("first navigation: %+v; want a 200 and no 103", first)
			}
			second := navigate(t, h2, url, true)
			want := []string{"<" + tc.prefix + "user-42.png>; rel=preload; as=image"}
			switch {
			case second.status != 200:
				t.Fatalf("second navigation: status %d", second.status)
			case tc.learns && (len(second.early) != 1 || !slices.Equal(second.early[0], want)):
				t.Fatalf("second navigation: 103s %q; want one with %q (the control learns)", second.early, want)
			case !tc.learns && len(second.early) != 0:
				t.Fatalf("second navigation: 103s %q; the first caller's per-user page was learned", second.early)
			}
		})
	}

	t.Run("front controller keys on the original path", func(t *testing.T) {
		navigate(t, h2, c.HTTPSURL("/fc/a"), true)
		navigate(t, h2, c.HTTPSURL("/fc/b"), true)
		for _, p := range []string{"/fc/a", "/fc/b"} {
			got := navigate(t, h2, c.HTTPSURL(p), true)
			want := []string{"<" + p + ".png>; rel=preload; as=image"}
			if len(got.early) != 1 || !slices.Equal(got.early[0], want) {
				t.Errorf("%s: 103s %q; want one with %q", p, got.early, want)
			}
		}
	})

	// What docs/early-hints.md says of the PoP's 103: Caddy's header
	// handler applies a deferred operation to 1xx responses too; a
	// response matcher (status 2xx) keeps it to the final response.
	t.Run("deferred header ops reach the PoP's 103", func(t *testing.T) {
		for _, tc := range []struct {
			prefix string
			on103  bool
		}{{"/cookie-103-defer/", true}, {"/cookie-103-2xx/", false}} {
			var mu sync.Mutex
			var early []string
			trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				mu.Lock()
				defer mu.Unlock()
				if code == http.StatusEarlyHints {
					early = append(early, h.Get("Set-Cookie"))
				}
				return nil
			}}
			req, _ := http.NewRequest("GET", c.HTTPSURL(tc.prefix+"x"), nil)
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
			req.Header.Set("Sec-Fetch-Mode", "navigate")
			resp, _ := Do(t, h2, req)
			mu.Lock()
			if len(early) != 1 || (early[0] == "edge=1") != tc.on103 {
				t.Errorf("%s: the 103s' Set-Cookie %q; want it on the 103: %v", tc.prefix, early, tc.on103)
			}
			mu.Unlock()
			if got := resp.Header.Get("Set-Cookie"); got != "edge=1" {
				t.Errorf("%s: the page's Set-Cookie %q, want edge=1", tc.prefix, got)
			}
		}
	})

	t.Run("no 103 to HTTP/1.0", func(t *testing.T) {
		navigate(t, h2, c.HTTPSURL("/h1/x"), true) // learned
		for _, tc := range []struct {
			version string
			hints   bool
		}{{"HTTP/1.1", true}, {"HTTP/1.0", false}} {
			raw := rawNavigation(t, c, tc.version, "/h1/x")
			if got := strings.Contains(raw, " 103 "); got != tc.hints {
				t.Errorf("%s: 103 sent %v, want %v; the response:\n%s", tc.version, got, tc.hints, raw)
			}
			if !strings.Contains(raw, " 200 ") {
				t.Errorf("%s: no 200 in\n%s", tc.version, raw)
			}
		}
	})
}

// rawNavigation sends one navigation in the given HTTP/1.x version over
// TLS (ALPN http/1.1, so no HTTP/2) and returns the bytes up to the body.
func rawNavigation(t *testing.T, c *Caddy, version, path string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", c.HTTPSAddr(), &tls.Config{ServerName: "localhost", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET %s %s\r\nHost: localhost:%d\r\nSec-Fetch-Mode: navigate\r\nConnection: close\r\n\r\n", path, version, c.HTTPSPort)
	b, err := io.ReadAll(io.LimitReader(conn, 1<<16))
	if err != nil && len(b) == 0 {
		t.Fatal(err)
	}
	return string(b)
}
