package dictionary

import (
	"crypto/sha256"
	"net/http"
	"strings"
	"testing"
)

func TestParseAvailableDictionary(t *testing.T) {
	hash := sha256.Sum256([]byte("dictionary"))
	good := formatAvailableDictionary(hash)
	for _, v := range []string{good, " " + good + " ", "  " + good} {
		got, err := parseAvailableDictionary([]string{v})
		if err != nil || got != hash {
			t.Errorf("%q: %v", v, err)
		}
	}
	for _, bad := range [][]string{
		nil,
		{""},
		{good, good},
		{good[1:]},
		{good[:len(good)-1]},
		{strings.TrimSuffix(good, "=:") + ":"},  // no padding
		{good + ";a=1"},                         // parameters
		{"\t" + good},                           // only SP is trimmed
		{":" + strings.Repeat("A", 42) + "B=:"}, // non-canonical padding bits
		{":" + strings.Repeat("A", 44) + ":"},   // 33 bytes (once panicked the parser)
		{":" + strings.Repeat("A", 40) + "AA==:"},                        // 31 bytes
		{":" + strings.ReplaceAll(good[1:len(good)-1], "+", "-") + "-:"}, // URL alphabet
		{`"` + good + `"`},
	} {
		if _, err := parseAvailableDictionary(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzAvailableDictionary: whatever a client sends, the parser neither
// panics nor accepts anything but the canonical form of some 32 bytes.
func FuzzAvailableDictionary(f *testing.F) {
	f.Add(formatAvailableDictionary(sha256.Sum256(nil)))
	f.Add(":abc:")
	f.Add("  :" + strings.Repeat("/", 43) + "=: ")
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		hash, err := parseAvailableDictionary([]string{v})
		if err != nil {
			return
		}
		if canonical := formatAvailableDictionary(hash); strings.Trim(v, " ") != canonical {
			t.Fatalf("accepted %q, which is not the canonical %q", v, canonical)
		}
	})
}

func TestPattern(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"/assets/app.*.js", "/assets/app.1.js", true},
		{"/assets/app.*.js", "/assets/app.abc.def.js", true},
		{"/assets/app.*.js", "/assets/app.js", false},
		{"/assets/app.*.js", "/assets/app.1.jsx", false},
		{"/assets/*", "/assets/", true},
		{"/assets/*", "/assets/a/b/c", true},
		{"/assets/*", "/asset", false},
		{"/*.js", "/a/b.js", true},
		{"/a**b", "/ab", true},
		{"/exact", "/exact", true},
		{"/exact", "/exact/", false},
		{"/a/.well-known/*", "/a/.well-known/x", true}, // a dot in a segment is no dot segment
		{"/a/...*", "/a/...x", true},
	} {
		if got := pattern(tc.pattern).matches(tc.path); got != tc.want {
			t.Errorf("%q matches %q = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
	for _, bad := range []string{"", "assets/*", "https://a.test/x", "/a/:id", "/a/(x)", "/a?b", "/a b", "/a\"b", "/a{x}", "/é", "/" + strings.Repeat("a", maxPatternLen),
		"/assets/../app.*.js", "/./app.*.js", "/a/..", "/a/%2E%2e/b", "/a/.%2e/b", "/a/%2e/*"} {
		if err := checkPattern(bad); err == nil {
			t.Errorf("checkPattern(%q) accepted", bad)
		}
	}
}

// FuzzPattern: matching is the reference (a regexp-free recursive glob) on
// every input, and never panics.
func FuzzPattern(f *testing.F) {
	f.Add("/assets/app.*.js", "/assets/app.1.js")
	f.Add("/*a*b*", "/xaybz")
	f.Add("/**", "/")
	f.Fuzz(func(t *testing.T, p, path string) {
		if len(p) > 64 || len(path) > 64 {
			return
		}
		if got, want := pattern(p).matches(path), globReference(p, path); got != want {
			t.Fatalf("%q matches %q = %v, want %v", p, path, got, want)
		}
	})
}

func globReference(p, s string) bool {
	if p == "" {
		return s == ""
	}
	if p[0] == '*' {
		for i := 0; i <= len(s); i++ {
			if globReference(p[1:], s[i:]) {
				return true
			}
		}
		return false
	}
	return s != "" && p[0] == s[0] && globReference(p[1:], s[1:])
}

func TestUseAsDictionary(t *testing.T) {
	if got, want := useAsDictionary("/a/*.js", []string{"script", "style"}, "v1"), `match="/a/*.js", match-dest=("script" "style"), id="v1"`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got, want := useAsDictionary("/a", nil, ""), `match="/a"`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestAddVary(t *testing.T) {
	h := http.Header{"Vary": {"accept-encoding, Origin"}}
	addVary(h, "Accept-Encoding", "Available-Dictionary")
	if got := strings.Join(h["Vary"], ", "); got != "accept-encoding, Origin, Available-Dictionary" {
		t.Errorf("Vary = %q", got)
	}
}
