package engine_test

import (
	"fmt"
	"strings"

	"github.com/caddy-edgekit/edgekit/substitute/internal/engine"
)

// The engine on its own: compile the rules once, then stream a body through
// them in chunks of any size. A match split across writes is still found;
// the stream holds back only the bytes that may start a match.
func Example() {
	set, err := engine.Compile([]engine.Rule{
		{Pattern: "http://", Literal: true, Replacement: "https://"},
		{Pattern: `(\d+) EUR`, Replacement: "€$1"},
		{Pattern: "price", Literal: true, Replacement: "$5 price"}, // $ is plain text in a literal rule
	}, engine.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	var out strings.Builder
	stream := set.NewStream(&out, nil)
	for _, chunk := range []string{"See http:", "//example.com: 12", " EUR, ", "the pri", "ce."} {
		if _, err := stream.Write([]byte(chunk)); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := stream.Close(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.String())
	// Output: See https://example.com: €12, the $5 price.
}

// {name} placeholders in a replacement are resolved once per stream, here
// from a map; an unknown one is written as it stands.
func Example_placeholders() {
	set, err := engine.Compile([]engine.Rule{
		{Pattern: "</body>", Literal: true, Replacement: `<script src="{cdn}/a.js"></script></body>`},
		{Pattern: "(?i)hello, (?P<who>\\w+)", Replacement: "Hi ${who} from {site}{unset}"},
	}, engine.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	values := map[string]string{"cdn": "https://cdn.example", "site": "example.com"}
	vars := func(name string) (string, bool) {
		v, ok := values[name]
		return v, ok
	}
	var out strings.Builder
	stream := set.NewStream(&out, vars)
	if _, err := stream.Write([]byte("<body>Hello, Ana</body>")); err != nil {
		fmt.Println(err)
		return
	}
	if err := stream.Close(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.String())
	// Output: <body>Hi Ana from example.com{unset}<script src="https://cdn.example/a.js"></script></body>
}
