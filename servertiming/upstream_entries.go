package servertiming

import (
	"strings"

	"golang.org/x/net/http/httpguts"
)

// ownName says name (an entry's name as an upstream wrote it) is one the
// PoP emits, in any case.
func ownName(name string) bool {
	switch len(name) {
	case 3:
		return strings.EqualFold(name, nameRTT)
	case 4:
		return strings.EqualFold(name, nameEdge)
	case 5:
		return strings.EqualFold(name, nameTotal)
	case 6:
		return strings.EqualFold(name, nameOrigin) || strings.EqualFold(name, nameClient)
	case 8:
		return strings.EqualFold(name, nameThrottle)
	case 10:
		return strings.EqualFold(name, nameOriginTLS) || strings.EqualFold(name, nameSubstitute)
	case 11:
		return strings.EqualFold(name, nameOriginConn) || strings.EqualFold(name, nameOriginDial)
	}
	return false
}

// dropOwnNames returns the upstream's Server-Timing field values keeping
// only its well-formed entries not named as the PoP's (a RUM script taking
// the first `edge` would read the upstream's), each as written, joined by
// ", ". An entry is `name *( OWS ";" OWS param [ OWS "=" OWS value ] )`,
// name and param tokens, a value a token or, where it starts, a
// quoted-string (backslash escapes, and it must close). An entry that does
// not parse exactly is dropped up to the next comma outside a properly
// opened quoted-string: a browser ends a token at a stray quote and skips
// to the next comma, so what it would read as a second entry must not
// survive. An unterminated quote drops the rest of the field value (it
// would swallow what follows, the PoP's entries included). Linear; a
// value already so written is returned as is, without allocating; vals
// is not modified (it may be an upstream's array).
func dropOwnNames(vals []string) []string {
	var out []string
	for i, v := range vals {
		nv, changed := dropOwnNamesValue(v)
		if changed && out == nil {
			out = make([]string, i, len(vals))
			copy(out, vals[:i])
		}
		if out != nil && nv != "" {
			out = append(out, nv)
		}
	}
	if out == nil {
		return vals
	}
	return out
}

// dropOwnNamesValue is dropOwnNames for one field value; changed says the
// result differs from v (then it is the kept entries joined by ", ", or
// "" for none).
func dropOwnNamesValue(v string) (string, bool) {
	var b strings.Builder
	// canon says v so far is the kept entries joined by ", ", ending at
	// canonEnd: then nothing is built until it stops being so.
	canon, canonEnd := true, 0
	keep := func(s, e int) {
		if canon {
			if (canonEnd == 0 && s == 0) || (canonEnd > 0 && s == canonEnd+2 && v[canonEnd:s] == ", ") {
				canonEnd = e
				return
			}
			canon = false
			b.Grow(len(v))
			b.WriteString(v[:canonEnd])
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v[s:e])
	}
	for i := 0; i < len(v); {
		i = skipOWS(v, i)
		if i == len(v) {
			break
		}
		if v[i] == ',' {
			i++
			continue
		}
		s := i
		e, ok, rest := parseEntry(v, i)
		if ok {
			name := v[s:tokenEnd(v, s)]
			if !ownName(name) {
				keep(s, e)
				// Trailing OWS before the comma is left out.
				i = e
				continue
			}
			i = e
		} else if rest {
			i = len(v) // an unterminated quote: nothing after it is an entry
		} else {
			i = skipMalformed(v, e)
		}
		if canon {
			canon = false
			b.Grow(len(v))
			b.WriteString(v[:canonEnd])
		}
	}
	if canon && canonEnd == len(v) && v != "" {
		return v, false
	}
	if canon {
		return v[:canonEnd], true
	}
	return b.String(), true
}

// parseEntry parses the entry starting at i (not OWS). With ok, e ends it
// (trailing OWS excluded) and v[e:] is empty or OWS then a comma. Without,
// e is where it failed, and rest says an unterminated quoted-string ran
// to the end of v.
func parseEntry(v string, i int) (e int, ok, rest bool) {
	s := i
	if i = tokenEnd(v, i); i == s {
		return i, false, false // no name
	}
	for {
		e = i
		i = skipOWS(v, i)
		if i == len(v) || v[i] == ',' {
			return e, true, false
		}
		if v[i] != ';' {
			return i, false, false
		}
		p := skipOWS(v, i+1)
		if i = tokenEnd(v, p); i == p {
			return i, false, false // no param name
		}
		j := skipOWS(v, i)
		if j == len(v) || v[j] != '=' {
			continue
		}
		j = skipOWS(v, j+1)
		if j < len(v) && v[j] == '"' {
			if i = quotedEnd(v, j); i < 0 {
				return len(v), false, true
			}
			continue
		}
		if i = tokenEnd(v, j); i == j {
			return i, false, false // no value
		}
	}
}

// skipMalformed returns the index after the comma that ends the malformed
// entry around i, a quoted-string that opens where a value starts (after
// "=" and OWS) skipped, or len(v) (also for an unterminated one).
func skipMalformed(v string, i int) int {
	afterEq := false
	for ; i < len(v); i++ {
		switch c := v[i]; {
		case c == ',':
			return i + 1
		case c == '=':
			afterEq = true
		case c == '"' && afterEq:
			if i = quotedEnd(v, i); i < 0 {
				return len(v)
			}
			i--
			afterEq = false
		case c == ' ' || c == '\t':
		default:
			afterEq = false
		}
	}
	return len(v)
}

// quotedEnd returns the index after the quoted-string opening at v[i], or
// -1 when it does not close or holds a byte a quoted-string cannot.
func quotedEnd(v string, i int) int {
	for i++; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i++; i == len(v) || !qdByte(v[i]) && v[i] != '"' && v[i] != '\\' {
				return -1
			}
		case !qdByte(c):
			return -1
		}
	}
	return -1
}

// qdByte: HTAB, SP, VCHAR but quote and backslash, obs-text.
func qdByte(c byte) bool {
	return c == '\t' || c == ' ' || (c >= 0x21 && c != '"' && c != '\\' && c != 0x7f)
}

func skipOWS(v string, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
		i++
	}
	return i
}

// tokenEnd returns the end of the token (RFC 9110 tchars) at v[i:].
func tokenEnd(v string, i int) int {
	for i < len(v) && httpguts.IsTokenRune(rune(v[i])) {
		i++
	}
	return i
}

// dropOwnNamesIn applies dropOwnNames to hdr[key], removing the key when
// nothing is left.
func dropOwnNamesIn(hdr map[string][]string, key string) {
	v, ok := hdr[key]
	if !ok {
		return
	}
	if v = dropOwnNames(v); len(v) == 0 {
		delete(hdr, key)
	} else {
		hdr[key] = v
	}
}
