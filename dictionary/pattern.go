package dictionary

import (
	"fmt"
	"strings"
)

// maxPatternLen bounds a match pattern (and so the work of matching it).
const maxPatternLen = 1024

// pattern is the match of a Use-As-Dictionary field, restricted to the part
// of URLPattern (RFC 9842's match) whose meaning this module and every
// browser agree on without a URLPattern engine: a path starting with "/"
// in which "*" matches any run of characters, "/" included. The other
// URLPattern syntax (":name", groups, "?", "+", "{…}", escapes) is refused
// at configuration time, so the server never marks a pattern it would read
// differently from the browser. The pattern is matched against the escaped
// path only (URLPattern leaves the other URL components as wildcards).
type pattern string

// checkPattern refuses what pattern does not support.
func checkPattern(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("match: empty (want a path such as /assets/app.*.js)")
	case len(p) > maxPatternLen:
		return fmt.Errorf("match: %d bytes: at most %d", len(p), maxPatternLen)
	case p[0] != '/':
		return fmt.Errorf("match %q: must be a path starting with / (same origin only; scheme and host are the response's own)", p)
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c <= ' ' || c >= 0x7f {
			return fmt.Errorf("match %q: byte %d: control, space or non-ASCII character (percent-encode it)", p, i)
		}
		if strings.IndexByte(`:(){}?+\"#`, c) >= 0 {
			return fmt.Errorf("match %q: %q is URLPattern syntax this module does not support (only * wildcards)", p, c)
		}
	}
	// The browser canonicalizes the pattern's path as a URL path, which
	// removes dot segments ("/a/../b" is "/b"); request paths never hold
	// them, so the handler would match nothing the browser does.
	for seg := range strings.SplitSeq(p, "/") {
		if s := strings.ReplaceAll(strings.ToLower(seg), "%2e", "."); s == "." || s == ".." {
			return fmt.Errorf("match %q: dot segment %q (the browser resolves it: write the path without it)", p, seg)
		}
	}
	return nil
}

// matches reports whether path matches p: "*" stands for any run of bytes.
// The classic greedy match with one backtrack point is linear in
// len(p)*len(path) at worst, and both are bounded.
func (p pattern) matches(path string) bool {
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(path) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(p) && p[pi] == path[si]:
			pi++
			si++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// checkToken refuses a match-dest or id value that would need escaping in
// an sf-string, or that a browser would not send back.
func checkToken(what, v string, maxLen int) error {
	if v == "" || len(v) > maxLen {
		return fmt.Errorf("%s %q: must be 1..%d characters", what, v, maxLen)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return fmt.Errorf("%s %q: printable ASCII without spaces, quotes or backslashes only", what, v)
		}
	}
	return nil
}
