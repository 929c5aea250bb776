package earlyhints

import (
	"slices"
	"testing"
)

func values(ls []link) []string {
	var v []string
	for _, l := range ls {
		v = append(v, l.value)
	}
	return v
}

// TestParseLinksKeepsHintableRels: preload, modulepreload and preconnect
// are kept with their as/crossorigin/type, serialised by the package;
// other rels, unknown parameters (nonce) and repeated rels are not.
func TestParseLinksKeepsHintableRels(t *testing.T) {
	got := values(parseLinks([]string{
		`</app.css>; rel=preload; as=style, </app.js>; rel="modulepreload"; nonce=abc123`,
		`<https://cdn.example.com>; rel=preconnect; crossorigin`,
		`</next>; rel=prefetch, </x.js>; rel="preload prefetch"; as=script; rel=stylesheet`,
		`</font.woff2>; REL=Preload; AS=font; type="font/woff2"; crossorigin=anonymous`,
	}))
	want := []string{
		"</app.css>; rel=preload; as=style",
		"</app.js>; rel=modulepreload",
		"<https://cdn.example.com>; rel=preconnect; crossorigin",
		"</x.js>; rel=preload; as=script",
		"</font.woff2>; rel=preload; as=font; type=\"font/woff2\"; crossorigin=anonymous",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
}

// TestParseLinksSkipsMalformed: a broken link-value is skipped up to its
// comma (outside quotes and brackets), the next one still parses; a
// target or parameter with a control character, space or non-ASCII byte
// is never kept.
func TestParseLinksSkipsMalformed(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`/app.css; rel=preload, </ok.js>; rel=preload`, []string{"</ok.js>; rel=preload"}},
		{`</a.js; rel=preload`, nil},
		{`</a b.js>; rel=preload, </ok.js>; rel=preload`, []string{"</ok.js>; rel=preload"}},
		{"</a.js\r\nSet-Cookie: x>; rel=preload", nil},
		{"</a.js>; rel=preload; as=\"scr\r\nipt\"", nil},
		{`</a.js>; rel=preload; as="a,b", </ok.js>; rel=preload`, []string{"</ok.js>; rel=preload"}},
		{`</a.js>; rel=preload; type="x\"y"`, nil},
		{`</a.js>; rel="preload`, nil},
		{`</é.js>; rel=preload`, nil},
		{`<>; rel=preload`, nil},
		{`</a.js>; rel=preload garbage, </ok.js>; rel=preload`, []string{"</ok.js>; rel=preload"}},
		{`,,, </ok.js> ; rel = preload ,`, []string{"</ok.js>; rel=preload"}},
		{`</a.js>; ; rel=preload`, nil},
	} {
		if got := values(parseLinks([]string{tc.in})); !slices.Equal(got, tc.want) {
			t.Errorf("parseLinks(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestParseLinksBoundsLength: a link longer than maxLinkLen is dropped.
func TestParseLinksBoundsLength(t *testing.T) {
	long := "</" + string(make([]byte, 0)) + repeat("a", maxLinkLen) + ">; rel=preload"
	if got := parseLinks([]string{long}); len(got) != 0 {
		t.Fatalf("kept a %d-byte link", len(got[0].value))
	}
}

func repeat(s string, n int) string {
	b := make([]byte, 0, n*len(s))
	for range n {
		b = append(b, s...)
	}
	return string(b)
}
