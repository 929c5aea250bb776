// Package edgekit brings every edgekit Caddy module and its Caddyfile
// directive: `xcaddy build --with github.com/caddy-edgekit/edgekit`. Each
// module package also registers its own directive, so it can be built alone,
// e.g. `--with github.com/caddy-edgekit/edgekit/ratelimit`.
package edgekit

import (
	_ "github.com/caddy-edgekit/edgekit/brotli"
	_ "github.com/caddy-edgekit/edgekit/clientip"
	_ "github.com/caddy-edgekit/edgekit/dictionary"
	_ "github.com/caddy-edgekit/edgekit/earlyhints"
	_ "github.com/caddy-edgekit/edgekit/ratelimit"
	_ "github.com/caddy-edgekit/edgekit/servertiming"
	_ "github.com/caddy-edgekit/edgekit/substitute"
)
