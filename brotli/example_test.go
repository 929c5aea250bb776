package caddybrotli_test

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"

	caddybrotli "github.com/caddy-edgekit/edgekit/brotli"
)

// br is an encoder of Caddy's encode handler, not a handler of its own: the
// JSON of an encode handler that prefers Brotli at quality 5 and falls back
// to gzip. The Caddyfile twin:
//
//	encode {
//		br 5
//		gzip
//	}
func Example() {
	quality := 5
	h := encode.Encode{
		EncodingsRaw: caddy.ModuleMap{
			"br":   caddyconfig.JSON(caddybrotli.Brotli{Quality: &quality}, nil),
			"gzip": caddyconfig.JSON(struct{}{}, nil),
		},
		Prefer: []string{"br", "gzip"},
	}
	var out bytes.Buffer
	if err := json.Indent(&out, caddyconfig.JSONModuleObject(h, "handler", "encode", nil), "", "\t"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.String())
	// Output:
	// {
	// 	"encodings": {
	// 		"br": {
	// 			"quality": 5
	// 		},
	// 		"gzip": {}
	// 	},
	// 	"handler": "encode",
	// 	"prefer": [
	// 		"br",
	// 		"gzip"
	// 	]
	// }
}
