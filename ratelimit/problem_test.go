package ratelimit

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func TestAcceptsProblem(t *testing.T) {
	for accept, want := range map[string]bool{
		"application/problem+json":                           true,
		"Application/Problem+JSON":                           true,
		"text/html, application/problem+json;q=0.5":          true,
		"application/json, application/problem+json ; q=1.0": true,
		"application/problem+json;q=0":                       false,
		"application/problem+json;q=0.000":                   false,
		"application/problem+json;q=abc":                     false,
		"application/problem+json;q=0x1p0":                   false,
		"application/problem+json;q=2":                       false,
		"application/json":                                   false,
		"*/*":                                                false,
		"application/*":                                      false,
		"":                                                   false,
		"application/problem+jsonx":                          false,
		"text/plain;charset=application/problem+json":        false,
		"text/plain, application/problem+json;level=1;q=0.1": true,
	} {
		if got := acceptsProblem([]string{accept}); got != want {
			t.Errorf("Accept %q: %v, want %v", accept, got, want)
		}
	}
	if !acceptsProblem([]string{"text/html", "application/problem+json"}) {
		t.Error("a second Accept line is not read")
	}
}

// serveAccept is one request through h with an Accept field, and, if
// errorRoutes, a server with handle_errors routes in its context.
func serveAccept(t *testing.T, h *Handler, accept string, errorRoutes bool) (*httptest.ResponseRecorder, error) {
	t.Helper()
	r := httptest.NewRequest("GET", "http://example.com/", nil)
	r.Header.Set("Accept", accept)
	vars := map[string]any{caddyhttp.ClientIPVarKey: "192.0.2.60"}
	ctx := context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars)
	srv := &caddyhttp.Server{}
	if errorRoutes {
		srv.Errors = &caddyhttp.HTTPErrorConfig{Routes: caddyhttp.RouteList{{}}}
	}
	r = r.WithContext(context.WithValue(ctx, caddyhttp.ServerCtxKey, srv))
	caddyhttp.NewTestReplacer(r)
	w := httptest.NewRecorder()
	err := h.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(200)
		return nil
	}))
	return w, err
}

// TestProblemDetails: a rejection is RFC 9457 problem details of the
// draft's quota-exceeded type when the client accepts
// application/problem+json and no handle_errors takes the error; else the
// error goes to Caddy as before.
func TestProblemDetails(t *testing.T) {
	c := &fakeClock{ns: int64(time.Hour)}
	h := memoryHandler(t, c, &Zone{Name: "problem", Rate: "1/1h"})
	if w, err := serveAccept(t, h, problemMedia, false); err != nil || w.Code != 200 {
		t.Fatalf("first request: %d %v", w.Code, err)
	}
	w, err := serveAccept(t, h, "text/html, application/problem+json", false)
	if err != nil {
		t.Fatalf("problem details: handler returned %v, want the response written", err)
	}
	if w.Code != 429 || w.Header().Get("Content-Type") != problemMedia || w.Header().Get("Retry-After") != "3600" || w.Header().Get("RateLimit") == "" {
		t.Fatalf("problem details: %d, headers %v", w.Code, w.Header())
	}
	var p map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	if p["type"] != "https://iana.org/assignments/http-problem-types#quota-exceeded" ||
		p["title"] != "Request cannot be satisfied as assigned quota has been exceeded" || p["status"] != float64(429) || len(p) != 3 {
		t.Fatalf("problem %v", p)
	}
	for _, tc := range []struct {
		accept      string
		errorRoutes bool
	}{{"application/json", false}, {"*/*", false}, {"", false}, {problemMedia, true}} {
		w, err := serveAccept(t, h, tc.accept, tc.errorRoutes)
		var he caddyhttp.HandlerError
		if !asHandlerError(err, &he) || he.StatusCode != 429 || w.Body.Len() != 0 {
			t.Fatalf("Accept %q, handle_errors %v: error %v, body %q; want the 429 error for Caddy", tc.accept, tc.errorRoutes, err, w.Body)
		}
	}
	// A configured status is the problem's.
	h503 := provision(t, &Handler{Zones: []*Zone{{Name: "problem-503", Rate: "1/1h"}}, Status: 503}, c)
	serveAccept(t, h503, problemMedia, false)
	if w, _ := serveAccept(t, h503, problemMedia, false); w.Code != 503 || !strings.Contains(w.Body.String(), `"status":503`) {
		t.Fatalf("status 503: %d %q", w.Code, w.Body)
	}
}

func asHandlerError(err error, he *caddyhttp.HandlerError) bool {
	e, ok := err.(caddyhttp.HandlerError)
	if ok {
		*he = e
	}
	return ok
}
