package earlyhints

import (
	"net/url"
	"strings"
)

// Bounds on what one path may hold, so that no upstream can make an entry
// large: a 103 with more than this is oversized for its purpose anyway.
const (
	maxLinkLen   = 1024 // bytes of one serialised link
	maxPathLinks = 16   // links per path
	maxKeyLen    = 2048 // bytes of host+path; longer requests are neither learned nor hinted
)

// link is one hintable Link field value, serialised by this package
// (never upstream text as it came): "<target>; rel=preload; as=script".
type link struct {
	target string // the URI-reference as written, validated
	rel    string // preload, modulepreload or preconnect
	value  string // the field value to send
}

// hintRels are the relations a 103 is useful for (browsers act on these in
// Early Hints; others are ignored there).
var hintRels = []string{"preload", "modulepreload", "preconnect"}

// keptParams are the target attributes copied into a hint; every other
// (nonce among them: a per-response token) is dropped.
var keptParams = []string{"as", "crossorigin", "type", "media", "fetchpriority", "integrity", "referrerpolicy"}

// parseLinks reads Link field values (RFC 8288 §3) into the hintable links
// they hold. The text is an upstream's, so the parse is strict and total:
// a malformed link-value is skipped up to the next top-level comma, never
// guessed at, and a link is kept only when its target and every kept
// parameter are printable ASCII without CR, LF or other controls, so the
// value written back can add no field. A link-value with several rels
// ("preload prefetch") yields one link per hintable rel.
func parseLinks(values []string) []link {
	var out []link
	for _, v := range values {
		for len(v) > 0 {
			var one []link
			one, v = parseLinkValue(v)
			out = append(out, one...)
		}
	}
	return out
}

// parseLinkValue parses one link-value at the start of s and returns the
// links it gives and the rest after its comma.
func parseLinkValue(s string) ([]link, string) {
	s = trimOWS(s)
	if s == "" {
		return nil, ""
	}
	if s[0] == ',' {
		return nil, s[1:]
	}
	if s[0] != '<' {
		return nil, skipToComma(s)
	}
	end := strings.IndexByte(s, '>')
	if end < 0 {
		return nil, ""
	}
	target := s[1:end]
	s = s[end+1:]
	var rels []string
	var params []string // "name=value" as serialised
	bad := !validTarget(target)
	seen := map[string]bool{}
	for {
		s = trimOWS(s)
		if s == "" || s[0] == ',' {
			break
		}
		if s[0] != ';' {
			return nil, skipToComma(s)
		}
		s = trimOWS(s[1:])
		n := tokenLen(s)
		if n == 0 {
			return nil, skipToComma(s)
		}
		name := strings.ToLower(s[:n])
		s = trimOWS(s[n:])
		var val string
		hasVal := false
		if s != "" && s[0] == '=' {
			s = trimOWS(s[1:])
			var ok bool
			val, s, ok = paramValue(s)
			if !ok {
				return nil, skipToComma(s)
			}
			hasVal = true
		}
		// RFC 8288 §3: occurrences after the first of rel (and of the
		// other parameters) are ignored.
		if seen[name] {
			continue
		}
		seen[name] = true
		switch {
		case name == "rel":
			for r := range strings.FieldsSeq(strings.ToLower(val)) {
				rels = append(rels, r)
			}
		case contains(keptParams, name):
			if !safeParam(val) {
				bad = true
			}
			if hasVal {
				params = append(params, name+"="+quoteIfNeeded(val))
			} else {
				params = append(params, name)
			}
		}
	}
	if s != "" && s[0] == ',' {
		s = s[1:]
	}
	if bad {
		return nil, s
	}
	var out []link
	for _, r := range rels {
		if !contains(hintRels, r) {
			continue
		}
		var b strings.Builder
		b.WriteString("<" + target + ">; rel=" + r)
		for _, p := range params {
			b.WriteString("; " + p)
		}
		if b.Len() <= maxLinkLen {
			out = append(out, link{target: target, rel: r, value: b.String()})
		}
	}
	return out, s
}

// paramValue reads a token or a quoted-string (with its escapes undone).
func paramValue(s string) (val, rest string, ok bool) {
	if s == "" {
		return "", s, true
	}
	if s[0] != '"' {
		n := tokenLen(s)
		return s[:n], s[n:], true
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], true
		case '\\':
			if i+1 == len(s) {
				return "", "", false
			}
			i++
			b.WriteByte(s[i])
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false // unterminated
}

// quoteIfNeeded writes v as a token, or as a quoted-string when it holds
// other characters (safeParam has refused quotes and backslashes).
func quoteIfNeeded(v string) string {
	if v != "" && tokenLen(v) == len(v) {
		return v
	}
	return `"` + v + `"`
}

// validTarget accepts a URI-reference of printable ASCII, no space, no
// angle bracket, quote or backslash, that url.Parse reads.
func validTarget(t string) bool {
	if t == "" || len(t) > maxLinkLen {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c <= ' ' || c >= 0x7f || c == '<' || c == '>' || c == '"' || c == '\\' {
			return false
		}
	}
	_, err := url.Parse(t)
	return err == nil
}

// safeParam accepts a parameter value of printable ASCII (space allowed)
// without quote, backslash, comma or semicolon, so it serialises as one
// quoted-string that even a naive splitter of Link fields reads as one
// parameter (a media list with a comma is not hinted).
func safeParam(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < ' ' || c >= 0x7f || c == '"' || c == '\\' || c == ',' || c == ';' {
			return false
		}
	}
	return true
}

func trimOWS(s string) string { return strings.TrimLeft(s, " \t") }

// skipToComma drops s up to and including the next comma outside a
// quoted-string or angle brackets.
func skipToComma(s string) string {
	inQuote, inAngle := false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"' && !inAngle:
			inQuote = !inQuote
		case c == '<' && !inQuote:
			inAngle = true
		case c == '>' && !inQuote:
			inAngle = false
		case c == ',' && !inQuote && !inAngle:
			return s[i+1:]
		}
	}
	return ""
}

// tokenLen is the length of the RFC 9110 token at the start of s.
func tokenLen(s string) int {
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return i
		}
	}
	return len(s)
}

func isTchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
