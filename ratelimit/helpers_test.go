package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// fakeClock is an injected monotonic clock in nanoseconds.
type fakeClock struct{ ns int64 }

func (c *fakeClock) now() int64 { return c.ns }

// provision provisions h as a config generation of its own, on clock c
// (nil: the real clock), and cleans it up when the test ends.
func provision(t testing.TB, h *Handler, c *fakeClock) *Handler {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return provisionIn(t, ctx, h, c)
}

func provisionIn(t testing.TB, ctx caddy.Context, h *Handler, c *fakeClock) *Handler {
	t.Helper()
	if c != nil {
		h.now = c.now
	}
	if err := h.Provision(ctx); err != nil {
		t.Fatalf("provision: %v", err)
	}
	if err := h.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	t.Cleanup(func() { _ = h.Cleanup() })
	return h
}

// result is what a client saw for one request.
type result struct {
	status int // 200, or the error's status
	header http.Header
	passed bool // next handler ran
	vars   map[string]any
}

// serve runs one request from clientIP through h, the way Caddy would: the
// client_ip variable set, a replacer in the context; the rest of the route
// answers 200.
func serve(t testing.TB, h *Handler, clientIP string, hdr map[string]string) result {
	t.Helper()
	return serveWith(t, h, clientIP, hdr, func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(200)
		return nil
	})
}

// serveWith is serve with next as the rest of the route; the result's
// status is what the client would see (a returned error's status, else
// what next wrote).
func serveWith(t testing.TB, h *Handler, clientIP string, hdr map[string]string, next caddyhttp.HandlerFunc) result {
	t.Helper()
	r := httptest.NewRequest("GET", "http://example.com/", nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	vars := map[string]any{caddyhttp.ClientIPVarKey: clientIP}
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
	caddyhttp.NewTestReplacer(r)
	w := httptest.NewRecorder()
	passed := false
	err := h.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		passed = true
		return next(w, r)
	}))
	res := result{status: w.Code, header: w.Header(), passed: passed, vars: vars}
	if err != nil {
		var he caddyhttp.HandlerError
		if !errors.As(err, &he) {
			t.Fatalf("error is not a caddyhttp.HandlerError: %v", err)
		}
		res.status = he.StatusCode
	}
	return res
}

func newContext() (caddy.Context, context.CancelFunc) {
	return caddy.NewContext(caddy.Context{Context: context.Background()})
}

// first is a call's first result.
func first[T any](v T, _ bool) T { return v }
