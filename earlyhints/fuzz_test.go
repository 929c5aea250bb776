package earlyhints

import (
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// FuzzParseLinks: whatever an upstream writes in Link, every link kept is
// one valid field value with one <target>, a hintable rel, no comma
// outside its target, at most maxLinkLen bytes; and parsing it again
// gives itself (what is sent is what was checked).
func FuzzParseLinks(f *testing.F) {
	for _, s := range []string{
		`</app.css>; rel=preload; as=style`,
		`</a.js>; rel="modulepreload preload"; crossorigin, <https://cdn.example>; rel=preconnect`,
		`</a.js>; rel=preload; as="scr\"ipt"`,
		"</a.js>; rel=preload\r\nSet-Cookie: x",
		`<//x>; rel=preload; type="a,b", </b>; rel=preload`,
		`</a>; rel=preload; media="(min-width: 1px)"; nonce=x`,
		`<`, `;`, `"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, l := range parseLinks([]string{s}) {
			v := l.value
			if !httpguts.ValidHeaderFieldValue(v) || strings.ContainsAny(v, "\r\n\x00") || len(v) > maxLinkLen {
				t.Fatalf("kept %q from %q: not one safe field value", v, s)
			}
			if strings.Count(v, "<") != 1 || strings.Count(v, ">") != 1 || !contains(hintRels, l.rel) {
				t.Fatalf("kept %q from %q: not one link", v, s)
			}
			if strings.Contains(v[strings.IndexByte(v, '>'):], ",") {
				t.Fatalf("kept %q from %q: a comma outside the target", v, s)
			}
			again := parseLinks([]string{v})
			if len(again) != 1 || again[0].value != v {
				t.Fatalf("%q parses again as %+v", v, again)
			}
		}
	})
}
