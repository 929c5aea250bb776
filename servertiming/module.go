// Package servertiming is the http.handlers.server_timing module: it tells
// the client where a request's time went, in W3C Server-Timing entries
// (https://www.w3.org/TR/server-timing/) that browsers hand to real-user
// monitoring (PerformanceResourceTiming.serverTiming): the time spent in
// this PoP, the upstream's time to first byte, whether the upstream
// connection was new (and its dial and TLS time) or reused, the client
// connection's protocol and TLS mode, the client's round-trip time, and the
// time edgekit's own modules spent (throttle's store decision, substitute's
// scan).
//
//	@rum header X-RUM 1
//	server_timing @rum {
//	    timing_allow_origin https://app.example.com
//	}
//
// Nothing is sent unless the directive is configured, and then only to
// requests its matcher matches. See docs/server-timing.md for what each
// entry measures, from which event to which.
package servertiming

import (
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler adds Server-Timing entries to the responses of the requests it
// handles.
type Handler struct {
	// TimingAllowOrigin are the origins whose pages may read the entries
	// of a cross-origin response (sent as Timing-Allow-Origin): each a
	// serialized origin such as "https://app.example.com", or "*" alone for
	// every page. Default: none, so only same-origin pages see them. The
	// request's Origin is never reflected.
	TimingAllowOrigin []string `json:"timing_allow_origin,omitempty"`

	tao    string // the Timing-Allow-Origin value, "" for none
	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.server_timing",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision prepares the Timing-Allow-Origin value and makes each HTTP
// server keep its TCP connections in their requests' context, for the
// client RTT.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if err := checkTimingAllowOrigin(h.TimingAllowOrigin); err != nil {
		return fmt.Errorf("server_timing: timing_allow_origin: %w", err)
	}
	h.tao = strings.Join(h.TimingAllowOrigin, ", ")
	app, err := ctx.App("http")
	if err != nil {
		return fmt.Errorf("server_timing: getting the http app: %w", err)
	}
	if httpApp, ok := app.(*caddyhttp.App); ok {
		for _, srv := range httpApp.Servers {
			srv.RegisterConnContext(keepConn)
		}
	}
	return nil
}

// Validate checks the configuration.
func (h *Handler) Validate() error {
	if err := checkTimingAllowOrigin(h.TimingAllowOrigin); err != nil {
		return fmt.Errorf("server_timing: timing_allow_origin: %w", err)
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
