package ratelimit

import "strconv"

// policyItem is a zone's RateLimit-Policy list member: its name as an
// sf-string, quota q and window w in seconds.
func policyItem(name string, r rate) string {
	q, w := r.policyWindow()
	return sfString(name) + ";q=" + strconv.FormatInt(q, 10) + ";w=" + strconv.FormatInt(w, 10)
}

// appendState appends a zone's RateLimit list member: r requests allowed
// right now, t seconds until the next one is.
func appendState(b []byte, z *zone, o outcome) []byte {
	b = append(b, z.quoted...)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, z.limit.remaining(o), 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, ceilSeconds(z.limit.wait(o)), 10)
}

// sfString quotes s as an RFC 9651 sf-string; zone names are printable
// ASCII, anything else is dropped.
func sfString(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20 && c < 0x7f:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}
