// Command testcaddy is ./cmd/caddy plus modules that exist only for tests
// (the IP-range source testipsource). The integration tests build it when a
// test needs those modules; it is never what users build.
package main

import (
	_ "time/tzdata"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-edgekit/edgekit"
	_ "github.com/caddy-edgekit/edgekit/integration/internal/testipsource"
)

func main() {
	caddycmd.Main()
}
