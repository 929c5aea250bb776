package servertiming

import "strings"

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

// dropOwnNames returns the upstream's Server-Timing field values without
// the entries named as the PoP's (a RUM script taking the first `edge`
// would read the upstream's), the others as the upstream wrote them. A
// value is a comma-separated list of `name *( ";" param [ "=" value ] )`
// where a value may be a quoted-string, commas and backslash escapes
// inside; an unterminated quote runs to the end of the field value. The
// scan is linear and allocates only for a value it changes; vals is not
// modified (it may be an upstream's array).
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

// dropOwnNamesValue is dropOwnNames for one field value; changed says an
// entry was dropped (then the kept ones are joined by ", ").
func dropOwnNamesValue(v string) (string, bool) {
	var b strings.Builder
	changed := false
	for start := 0; start <= len(v); {
		end := entryEnd(v, start)
		entry := strings.TrimSpace(v[start:end])
		name := entry
		if i := strings.IndexByte(name, ';'); i >= 0 {
			name = strings.TrimSpace(name[:i])
		}
		if ownName(name) {
			if !changed {
				changed = true
				// The entries before this one were all kept.
				b.Grow(len(v))
				b.WriteString(strings.TrimSpace(v[:max(start-1, 0)]))
			}
		} else if entry != "" {
			if changed {
				if b.Len() > 0 {
					b.WriteString(", ")
				}
				b.WriteString(entry)
			}
		}
		start = end + 1
	}
	if !changed {
		return v, false
	}
	return b.String(), true
}

// entryEnd returns the index of the comma that ends the entry beginning at
// start (outside a quoted-string), or len(v).
func entryEnd(v string, start int) int {
	quoted := false
	for i := start; i < len(v); i++ {
		switch c := v[i]; {
		case quoted && c == '\\':
			i++ // the escaped byte
		case c == '"':
			quoted = !quoted
		case !quoted && c == ',':
			return i
		}
	}
	return len(v)
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
