package substitute_test

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-edgekit/edgekit/substitute"
)

// The JSON of a substitute handler, as it goes into a route's "handle"
// list: a literal rule, whose $ is written as is, and a regex rule, whose
// ${1} is its first group. The Caddyfile twin:
//
//	substitute {
//		replace "http://example.com" "https://example.com"
//		regex "(\d+) EUR" "€${1}"
//		replace "%PRICE%" "$5" once
//	}
func ExampleHandler() {
	h := substitute.Handler{
		Rules: []substitute.Rule{
			{Find: "http://example.com", Replace: "https://example.com"},
			{Find: `(\d+) EUR`, Regex: true, Replace: "€${1}"},
			{Find: "%PRICE%", Replace: "$5", Once: true},
		},
	}
	var out bytes.Buffer
	if err := json.Indent(&out, caddyconfig.JSONModuleObject(h, "handler", "substitute", nil), "", "\t"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.String())
	// Output:
	// {
	// 	"handler": "substitute",
	// 	"rules": [
	// 		{
	// 			"find": "http://example.com",
	// 			"replace": "https://example.com"
	// 		},
	// 		{
	// 			"find": "(\\d+) EUR",
	// 			"regex": true,
	// 			"replace": "€${1}"
	// 		},
	// 		{
	// 			"find": "%PRICE%",
	// 			"once": true,
	// 			"replace": "$5"
	// 		}
	// 	]
	// }
}
