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

// TestErrorRoutesWriteTheirOwn: an error returned before anything was
// written, on a server with error routes, leaves the header to them: no
// entries and no Timing-Allow-Origin that their reverse_proxy's fields
// would join unfiltered, and the request no longer marked as timed, so a
// server_timing inside them times their response. Without error routes,
// or inside them, the error's header gets the entries.
func TestErrorRoutesWriteTheirOwn(t *testing.T) {
	withErrorRoutes := &caddyhttp.Server{Errors: &caddyhttp.HTTPErrorConfig{Routes: caddyhttp.RouteList{{}}}}
	fails := func(w http.ResponseWriter, r *http.Request) error {
		return caddyhttp.Error(502, errors.New("upstream down"))
	}
	for _, c := range []struct {
		name        string
		srv         *caddyhttp.Server
		inErrRoutes bool
		timed       bool
	}{
		{"no server in the context", nil, false, true},
		{"a server without error routes", &caddyhttp.Server{}, false, true},
		{"a server with error routes", withErrorRoutes, false, false},
		{"inside the error routes", withErrorRoutes, true, true},
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
			if err := serve(t, h, rec, r, fails); err == nil {
				t.Fatal("the handler swallowed the error")
			}
			st, tao := rec.header["Server-Timing"], rec.header["Timing-Allow-Origin"]
			vars := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
			on, _ := vars[VarOn].(bool)
			if c.timed {
				if names := entryNames(st); len(names) < 2 || names[0] != "edge" || len(tao) != 1 {
					t.Errorf("entries %v, Timing-Allow-Origin %q; want the PoP's and the configured one", names, tao)
				}
				if logs.Len() != 1 {
					t.Errorf("%d debug log lines, want 1", logs.Len())
				}
			} else {
				if st != nil || tao != nil {
					t.Errorf("Server-Timing %q, Timing-Allow-Origin %q in the header the error routes write", st, tao)
				}
				if on {
					t.Errorf("%s still set: a server_timing inside the error routes would pass", VarOn)
				}
				if logs.Len() != 0 {
					t.Errorf("%d debug log lines for a response this handler did not time", logs.Len())
				}
			}
		})
	}
}
