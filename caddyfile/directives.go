// Package caddyfile registers edgekit's Caddyfile directives and their default
// order in one place, so no user needs an `order` line. Each module package
// parses its own tokens in its UnmarshalCaddyfile.
package caddyfile

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-edgekit/edgekit/clientip"
	"github.com/caddy-edgekit/edgekit/ratelimit"
	"github.com/caddy-edgekit/edgekit/substitute"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("client_ip", parse[clientip.Handler])
	httpcaddyfile.RegisterDirectiveOrder("client_ip", httpcaddyfile.After, "tracing")
	httpcaddyfile.RegisterHandlerDirective("substitute", parse[substitute.Handler])
	httpcaddyfile.RegisterDirectiveOrder("substitute", httpcaddyfile.After, "encode")
	httpcaddyfile.RegisterHandlerDirective("throttle", parse[ratelimit.Handler])
	httpcaddyfile.RegisterDirectiveOrder("throttle", httpcaddyfile.Before, "basic_auth")
}

// handlerModule is a middleware module that parses its own Caddyfile tokens.
type handlerModule[T any] interface {
	*T
	caddyhttp.MiddlewareHandler
	caddyfile.Unmarshaler
}

// parse adapts a module's UnmarshalCaddyfile to a directive; the matcher
// token is consumed by RegisterHandlerDirective before this runs.
func parse[T any, PT handlerModule[T]](h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := PT(new(T))
	if err := m.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return m, nil
}
