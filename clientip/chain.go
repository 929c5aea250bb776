package clientip

import (
	"net/netip"
	"strings"
)

// maxHops bounds `hops`; maxChainFields and maxChainBytes bound how long a
// chain may be before it is not believed at all. No real path has more than
// a handful of proxies, and the bounds keep the work per request small
// whatever a caller sends.
const (
	maxHops        = 16
	maxChainFields = 64
	maxChainBytes  = 8 << 10

	// RFC 7239 defines four parameters (for, by, host, proto); an element
	// with more than maxPairs is not one a proxy wrote.
	maxPairs = 16
)

// tooLong reports whether header lines exceed maxChainBytes in total.
func tooLong(lines []string) bool {
	n := 0
	for _, line := range lines {
		n += len(line)
	}
	return n > maxChainBytes
}

// member is one entry of the forwarding chain as read from a header.
type member struct {
	addr  netip.Addr
	text  string // address text as written, for allocation-free String
	valid bool

	// Where the entry starts in the X-Forwarded-For lines, so the header can
	// be trimmed to the part the edge vouches for.
	line, offset int
}

// members holds the rightmost entries of a chain, rightmost first.
type members struct {
	m [maxHops]member
	n int
}

// xffTooLong reports whether the X-Forwarded-For lines are longer than
// maxChainBytes or hold more than maxChainFields comma-separated fields
// (empty ones included): cheap, vectorised checks.
func xffTooLong(lines []string) bool {
	if tooLong(lines) {
		return true
	}
	fields := 0
	for _, line := range lines {
		fields += strings.Count(line, ",") + 1
		if fields > maxChainFields {
			return true
		}
	}
	return false
}

// lastXFF collects the rightmost `want` non-empty entries of the
// X-Forwarded-For lines (joined in order), walking from the right without
// splitting. It stops at the first entry that is not an address, since
// nothing left of it can be believed, and gives up on an entry as soon as
// it is longer than any address or holds a character none has: the work
// depends on the entries read, not on what the caller wrote further left.
func lastXFF(lines []string, want int, out *members) {
	out.n = 0
	for li := len(lines) - 1; li >= 0 && out.n < want; li-- {
		line := lines[li]
		end := len(line)
		for out.n < want {
			tokEnd := end
			for tokEnd > 0 && isOWS(line[tokEnd-1]) {
				tokEnd--
			}
			tokStart := tokEnd
			for tokStart > 0 && line[tokStart-1] != ',' && !isOWS(line[tokStart-1]) {
				if tokEnd-tokStart >= maxNodeLen || !isNodeChar(line[tokStart-1]) {
					out.m[out.n] = member{} // invalid
					out.n++
					return
				}
				tokStart--
			}
			start := tokStart
			for start > 0 && isOWS(line[start-1]) {
				start--
			}
			if start > 0 && line[start-1] != ',' { // "a b": two words in one entry
				out.m[out.n] = member{}
				out.n++
				return
			}
			if tokStart < tokEnd {
				addr, text, ok := parseNode(line[tokStart:tokEnd])
				out.m[out.n] = member{addr: addr, text: text, valid: ok, line: li, offset: tokStart}
				out.n++
				if !ok {
					return
				}
			}
			if start == 0 {
				break
			}
			end = start - 1
		}
	}
}

func isOWS(c byte) bool { return c == ' ' || c == '\t' }

// lastForwarded collects the `for=` nodes of the rightmost `want` elements
// of the RFC 7239 Forwarded lines, rightmost first. Quoted strings may hold
// commas, so the field is read left to right into a ring of `want` slots.
// It reports true, reading nothing, when the field is longer than
// maxChainBytes, and stops as soon as it has more than maxChainFields
// elements.
func lastForwarded(lines []string, want int, out *members) (chainTooLong bool) {
	if tooLong(lines) {
		return true
	}
	var ring members
	total := 0
	for _, line := range lines {
		for i := 0; ; {
			elem, next, empty := forwardedElement(line, i)
			if !empty {
				total++
				if total > maxChainFields {
					return true
				}
				if want > 0 {
					ring.m[(total-1)%want] = elem
				}
			}
			if next >= len(line) {
				break
			}
			i = next + 1 // past the comma
		}
	}
	out.n = 0
	for k := 0; k < want && k < total; k++ {
		out.m[k] = ring.m[(total-1-k)%want]
		out.n++
	}
	return false
}

// forwardedElement parses the forwarded-element of line starting at i and
// returns its `for` node, the index of the comma that ends it (or
// len(line)), and whether the element was empty (only whitespace), which
// the list syntax says to ignore. Any syntax error, a missing or repeated
// `for`, or a node that is `unknown`, obfuscated or escaped makes the node
// invalid; the parse then resumes at the next comma outside quotes.
func forwardedElement(line string, i int) (member, int, bool) {
	var (
		forValue string
		forSeen  bool
		bad      bool
		pairs    int
	)
	n := len(line)
	for {
		i = skipOWS(line, i)
		if i >= n || line[i] == ',' {
			break
		}
		if line[i] == ';' {
			i++
			continue
		}
		pairs++
		if pairs > maxPairs {
			bad = true
			i = skipToComma(line, i)
			break
		}
		nameStart := i
		for i < n && isTchar(line[i]) {
			i++
		}
		name := line[nameStart:i]
		if name == "" || i >= n || line[i] != '=' {
			bad = true
			i = skipToComma(line, i)
			break
		}
		i++ // '='
		var value string
		if i < n && line[i] == '"' {
			i++
			valueStart := i
			escaped := false
			for i < n && line[i] != '"' {
				if line[i] == '\\' {
					escaped = true
					i++
				}
				i++
			}
			if i >= n { // unterminated quoted-string: nothing after it can be read
				return member{}, n, false
			}
			value = line[valueStart:i]
			i++ // closing quote
			if escaped {
				// A valid node never needs an escape; refusing it keeps the
				// parse allocation-free.
				bad = true
				i = skipToComma(line, i)
				break
			}
		} else {
			valueStart := i
			for i < n && isTchar(line[i]) {
				i++
			}
			value = line[valueStart:i]
			if value == "" {
				bad = true
				i = skipToComma(line, i)
				break
			}
		}
		if len(name) == 3 && strings.EqualFold(name, "for") {
			if forSeen {
				bad = true // RFC 7239 section 4: a parameter occurs at most once
				i = skipToComma(line, i)
				break
			}
			forSeen = true
			forValue = value
		}
		i = skipOWS(line, i)
		if i < n && line[i] != ';' && line[i] != ',' {
			bad = true
			i = skipToComma(line, i)
			break
		}
	}
	if pairs == 0 && !bad {
		return member{}, i, true
	}
	if bad || !forSeen {
		return member{}, i, false
	}
	addr, text, ok := parseForwardedNode(forValue)
	return member{addr: addr, text: text, valid: ok}, i, false
}

// parseForwardedNode parses an RFC 7239 node: IPv4, "[IPv6]", each with an
// optional port or obfuscated port. `unknown` and obfuscated identifiers
// ("_hidden") name no address, so they are invalid.
func parseForwardedNode(node string) (netip.Addr, string, bool) {
	if node == "" || node[0] == '_' || strings.EqualFold(node, "unknown") {
		return netip.Addr{}, "", false
	}
	// An obfuscated port says nothing about the address; drop it.
	if i := strings.LastIndexByte(node, ':'); i >= 0 && i+1 < len(node) && node[i+1] == '_' {
		if !validObfuscated(node[i+1:]) {
			return netip.Addr{}, "", false
		}
		node = node[:i]
	}
	return parseNode(node)
}

// validObfuscated reports whether s is an RFC 7239 obfnode/obfport:
// "_" 1*(ALPHA / DIGIT / "." / "_" / "-").
func validObfuscated(s string) bool {
	if len(s) < 2 || s[0] != '_' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func skipOWS(s string, i int) int {
	for i < len(s) && isOWS(s[i]) {
		i++
	}
	return i
}

// skipToComma returns the index of the next comma outside a quoted-string,
// or len(s). It jumps with IndexByte rather than stepping through bytes, and
// looks for the comma again only once a quoted-string has passed it, so it
// stays linear whatever the mix of quotes and commas.
func skipToComma(s string, i int) int {
	comma := -1 // the first comma at or after i; len(s) if none
	for i < len(s) {
		if comma < i {
			if c := strings.IndexByte(s[i:], ','); c >= 0 {
				comma = i + c
			} else {
				comma = len(s)
			}
		}
		q := strings.IndexByte(s[i:comma], '"')
		if q < 0 {
			return comma
		}
		for i += q + 1; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' {
				i++
			}
		}
		i++ // closing quote
	}
	return len(s)
}

// isTchar reports whether c is an RFC 9110 token character.
func isTchar(c byte) bool { return tchar[c] }

var tchar = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0
	}
	return t
}()
