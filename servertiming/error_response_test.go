package servertiming

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestErrorResponseLeftToItsHandlers: an error returned before anything
// was written leaves its response to whatever handles the error (the
// server's error routes, a subroute's, Caddy's bare status), which write
// it after this handler, past its filters: no entries, no
// Timing-Allow-Origin for their fields to join, no log line, and the
// request no longer marked as timed, whatever the context says about
// error routes and whatever the status (a 1xx too).
func TestErrorResponseLeftToItsHandlers(t *testing.T) {
	withErrorRoutes := &caddyhttp.Server{Errors: &caddyhttp.HTTPErrorConfig{Routes: caddyhttp.RouteList{{}}}}
	for _, c := range []struct {
		name        string
		srv         *caddyhttp.Server
		inErrRoutes bool
		status      int
	}{
		{"no server in the context", nil, false, 502},
		{"a server without error routes", &caddyhttp.Server{}, false, 502},
		{"a server with error routes", withErrorRoutes, false, 502},
		{"inside the error routes", withErrorRoutes, true, 502},
		{"a 1xx status", nil, false, 103},
		{"a 429", nil, false, 429},
	} {
		t.Run(c.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			h := &Handler{logger: zap.New(core), tao: "https://app.example"}
			r := newRequest("GET", 2)
			ctx := r.Context()
			if c.srv != nil {
				ctx = context.WithValue(ctx, caddyhttp.ServerCtxKey, c.srv)
			}
			if c.inErrRoutes {
				ctx = context.WithValue(ctx, caddyhttp.ErrorCtxKey, errors.New("first error"))
			}
			r = r.WithContext(ctx)
			rec := newRecorder()
			err := serve(t, h, rec, r, func(w http.ResponseWriter, r *http.Request) error {
				return caddyhttp.Error(c.status, errors.New("upstream down"))
			})
			if err == nil {
				t.Fatal("the handler swallowed the error")
			}
			if st, tao := rec.header["Server-Timing"], rec.header["Timing-Allow-Origin"]; st != nil || tao != nil {
				t.Errorf("Server-Timing %q, Timing-Allow-Origin %q in the header the error's handlers write", st, tao)
			}
			if on, _ := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)[VarOn].(bool); on {
				t.Errorf("%s still set: a server_timing among the error's handlers would pass", VarOn)
			}
			if logs.Len() != 0 {
				t.Errorf("%d debug log lines for a response this handler did not time", logs.Len())
			}
		})
	}
}

// TestErrorRoutesTimeTheirResponse: after the route's server_timing left
// an error, one among the error's handlers (handle_errors) times their
// response, its fields filtered: its own Timing-Allow-Origin alone, the
// upstream's PoP-named entries dropped, the PoP's first.
func TestErrorRoutesTimeTheirResponse(t *testing.T) {
	r := newRequest("GET", 2)
	outer := &Handler{logger: zap.NewNop(), tao: "https://app.example"}
	err := serve(t, outer, newRecorder(), r, func(w http.ResponseWriter, r *http.Request) error {
		return caddyhttp.Error(502, errors.New("upstream down"))
	})
	if err == nil {
		t.Fatal("the outer handler swallowed the error")
	}
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.ErrorCtxKey, err))
	inner := &Handler{logger: zap.NewNop(), tao: "https://errors.example"}
	rec := newRecorder()
	_ = serve(t, inner, rec, r, func(w http.ResponseWriter, r *http.Request) error {
		h := w.Header() // an error page proxied from a hostile upstream
		h.Set("Timing-Allow-Origin", "*")
		h["Server-Timing"] = []string{"edge;dur=0, app;dur=1"}
		h.Set("Content-Length", "10") // not streamed: the entries in the header alone
		w.WriteHeader(http.StatusOK)
		_, err := w.Write([]byte("error page"))
		return err
	})
	final := rec.final()
	if got := final["Timing-Allow-Origin"]; len(got) != 1 || got[0] != "https://errors.example" {
		t.Errorf("Timing-Allow-Origin %q, want the error routes' server_timing's alone", got)
	}
	if n := entryNames(final["Server-Timing"]); len(n) < 3 || n[0] != "edge" || n[1] != "client" || n[len(n)-1] != "app" {
		t.Errorf("entries %v, want the PoP's first and the upstream's app, its edge dropped", n)
	}
}
