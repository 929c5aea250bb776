// Command caddy is Caddy with its standard modules and every edgekit module,
// so `go run ./cmd/caddy` works without xcaddy.
package main

import (
	_ "time/tzdata"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-edgekit/edgekit"
)

func main() {
	caddycmd.Main()
}
