package clientip_test

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-edgekit/edgekit/clientip"
)

// The JSON of a client_ip handler, as it goes into a route's "handle" list:
// behind one CDN layer that proves itself with a shared secret, requests
// from elsewhere refused. The Caddyfile twin:
//
//	client_ip {
//		trusted_proxies 192.0.2.0/24 2001:db8::/32
//		hops 1
//		secret X-Edge-Secret {env.EDGE_SECRET}
//		untrusted reject
//	}
func ExampleHandler() {
	hops := 1
	h := clientip.Handler{
		TrustedProxies: []string{"192.0.2.0/24", "2001:db8::/32"},
		Hops:           &hops,
		Secret:         &clientip.Secret{Header: "X-Edge-Secret", Value: "{env.EDGE_SECRET}"},
		Untrusted:      "reject",
	}
	var out bytes.Buffer
	if err := json.Indent(&out, caddyconfig.JSONModuleObject(h, "handler", "client_ip", nil), "", "\t"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.String())
	// Output:
	// {
	// 	"handler": "client_ip",
	// 	"hops": 1,
	// 	"secret": {
	// 		"header": "X-Edge-Secret",
	// 		"value": "{env.EDGE_SECRET}"
	// 	},
	// 	"trusted_proxies": [
	// 		"192.0.2.0/24",
	// 		"2001:db8::/32"
	// 	],
	// 	"untrusted": "reject"
	// }
}
