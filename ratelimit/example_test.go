package ratelimit_test

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-edgekit/edgekit/ratelimit"
)

// The JSON of a throttle handler, as it goes into a route's "handle" list:
// 100 requests a minute per client address, bursts of 20, counted in
// Redis so that every Caddy sharing it shares the limit. The Caddyfile twin:
//
//	throttle {
//		zone api {
//			rate 100/1m
//			burst 20
//		}
//		store redis {
//			address 127.0.0.1:6379
//		}
//	}
func ExampleHandler() {
	h := ratelimit.Handler{
		Zones: []*ratelimit.Zone{{Name: "api", Rate: "100/1m", Burst: new(int64(20))}},
		Store: &ratelimit.Store{Type: "redis", Redis: &ratelimit.RedisStore{Address: "127.0.0.1:6379"}},
	}
	var out bytes.Buffer
	if err := json.Indent(&out, caddyconfig.JSONModuleObject(h, "handler", "throttle", nil), "", "\t"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.String())
	// Output:
	// {
	// 	"handler": "throttle",
	// 	"store": {
	// 		"redis": {
	// 			"address": "127.0.0.1:6379"
	// 		},
	// 		"type": "redis"
	// 	},
	// 	"zones": [
	// 		{
	// 			"burst": 20,
	// 			"name": "api",
	// 			"rate": "100/1m"
	// 		}
	// 	]
	// }
}
