// Package edgekit brings every edgekit Caddy module and its Caddyfile
// directive: `xcaddy build --with github.com/caddy-edgekit/edgekit`.
package edgekit

import (
	_ "github.com/caddy-edgekit/edgekit/brotli"
	_ "github.com/caddy-edgekit/edgekit/caddyfile"
)
