package servertiming

import (
	"slices"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-edgekit/edgekit/internal/suggest"
)

// The directive registers itself with its package. Its default order is
// first of all, before tracing (the first of Caddy's directives, which
// client_ip follows): it must see the whole request, including throttle's
// decision and client_ip's work, and write its entries after every other
// handler's header changes. So a client_ip matcher on it sees Caddy's own
// client IP, not client_ip's: limit it by remote_ip, a header or a path.
func init() {
	httpcaddyfile.RegisterHandlerDirective("server_timing", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("server_timing", httpcaddyfile.Before, "tracing")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	if err := m.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return m, nil
}

var subdirectives = []string{"timing_allow_origin"}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	server_timing [<matcher>] {
//	    timing_allow_origin <origin>...|*   # e.g. https://app.example.com
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		opt := d.Val()
		if !slices.Contains(subdirectives, opt) {
			return suggest.Unknown(d, opt, "server_timing", "", subdirectives...)
		}
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.Errf("server_timing: timing_allow_origin: want one or more origins, or *")
		}
		h.TimingAllowOrigin = append(h.TimingAllowOrigin, args...)
		if err := checkTimingAllowOrigin(h.TimingAllowOrigin); err != nil {
			return d.Errf("server_timing: timing_allow_origin: %v", err)
		}
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Handler)(nil)
