package clientip

import (
	"net/netip"
	"strings"
)

// maxHops bounds `hops`; maxChainFields and maxChainBytes bound how much of
// a chain is read before it is not believed at all. They count only what is
// parsed: from the right end of the last header line through the client
// entry (the client's leading whitespace excluded), empty members and lines
// included. Whatever a caller wrote further left is never read, so no amount
// of it changes the outcome. No real path has more than a handful of
// proxies, and the bounds keep the work per request small even when the
// edge passes a caller's header through untouched.
const (
	maxHops        = 16
	maxChainFields = 64
	maxChainBytes  = 8 << 10

	// RFC 7239 defines four parameters (for, by, host, proto); an element
	// with more than maxPairs is not one a proxy wrote.
	maxPairs = 16
)

// member is one entry of the forwarding chain as read from a header.
type member struct {
	addr  netip.Addr
	text  string // address text as written, for allocation-free String
	valid bool

	// Where the entry (Forwarded element) starts in the header's lines, so
	// the header can be trimmed to the part the edge vouches for.
	line, offset int
}

// members holds the rightmost entries of a chain, rightmost first.
type members struct {
	m [maxHops]member
	n int
	// recursive walks: the last member collected is the first outside
	// the trusted ranges, the client.
	client bool
}

// chainScan walks header lines from the right, keeping the caps. Bytes
// left of a line's floor lie beyond maxChainBytes.
type chainScan struct {
	budget int // bytes left for the lines not yet entered
	fields int
}

func newChainScan() chainScan { return chainScan{budget: maxChainBytes} }

// floor returns the lowest index of line that still fits in the budget.
func (s *chainScan) floor(line string) int { return len(line) - s.budget }

// field counts one more member (empty ones too) and reports whether that is
// one too many.
func (s *chainScan) field() bool {
	s.fields++
	return s.fields > maxChainFields
}

// leave charges a line passed in full.
func (s *chainScan) leave(line string) { s.budget -= len(line) }

// spanCheck ends a walk. With hops, at the first member of the trusted
// span (the `span` rightmost members) that is not trusted: the request
// did not come through the edge, and nothing further left may be read.
// Recursive, at the first member that is not trusted, wherever it is: it
// is the client.
type spanCheck struct {
	span      int
	trust     trustSet
	recursive bool
}

// judge says of the (valid) member just collected whether the walk fails
// there (a span member not trusted) or has found the client (recursive).
// Trust is looked up only where it decides something.
func (c spanCheck) judge(out *members) (fail, client bool) {
	if c.recursive {
		out.client = !c.trust.contains(out.m[out.n-1].addr)
		return false, out.client
	}
	return out.n <= c.span && c.trust.check && !c.trust.contains(out.m[out.n-1].addr), false
}

func inPrefixes(prefixes []netip.Prefix, addr netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// lastXFF collects the rightmost `want` non-empty entries of the
// X-Forwarded-For lines (joined in order), walking from the right without
// splitting. It stops at the first entry that is not an address, since
// nothing left of it can be believed, and gives up on an entry as soon as
// it is longer than any address or holds a character none has, and at the
// first member of the span that stop finds untrusted. It reports
// true when the part it had to read breaks the caps. It never reads left of
// the last entry it collects (but for the whitespace before it, to find
// that the entry ends there), so what a caller wrote there costs nothing
// and changes nothing.
func lastXFF(lines []string, want int, stop spanCheck, out *members) (chainTooLong bool) {
	out.n, out.client = 0, false
	scan := newChainScan()
	for li := len(lines) - 1; li >= 0 && out.n < want; li-- {
		line := lines[li]
		floor := scan.floor(line)
		end := len(line)
		for {
			if scan.field() {
				return true
			}
			tokEnd := end
			for tokEnd > 0 && isOWS(line[tokEnd-1]) {
				if tokEnd-1 < floor {
					return true
				}
				tokEnd--
			}
			tokStart := tokEnd
			for tokStart > 0 && line[tokStart-1] != ',' && !isOWS(line[tokStart-1]) {
				if tokStart-1 < floor {
					return true
				}
				if tokEnd-tokStart >= maxNodeLen || !isNodeChar(line[tokStart-1]) {
					out.m[out.n] = member{} // invalid
					out.n++
					return false
				}
				tokStart--
			}
			start := tokStart
			if tokStart < tokEnd {
				addr, text, ok := parseNode(line[tokStart:tokEnd])
				out.m[out.n] = member{addr: addr, text: text, valid: ok, line: li, offset: tokStart}
				out.n++
				// A member that ends the walk is judged before anything
				// left of it is looked at.
				if !ok {
					return false
				}
				fail, client := stop.judge(out)
				if fail {
					return false
				}
				// The whitespace before the last entry wanted (the client)
				// is the separator's: not counted, so the outcome is the
				// same whether the edge appended to the caller's line or
				// added its own.
				last := client || out.n == want
				for start > 0 && isOWS(line[start-1]) {
					if !last && start-1 < floor {
						return true
					}
					start--
				}
				if start > 0 && line[start-1] != ',' { // "a b": two words in one entry
					out.m[out.n-1] = member{}
					return false
				}
				if last {
					return false
				}
			}
			if start == 0 {
				break
			}
			if start-1 < floor { // the comma
				return true
			}
			end = start - 1
		}
		scan.leave(line)
	}
	return false
}

func isOWS(c byte) bool { return c == ' ' || c == '\t' }

// lastForwarded collects the `for=` nodes of the rightmost `want` elements
// of the RFC 7239 Forwarded lines, rightmost first, reading from the right
// like lastXFF. An element ends at the nearest comma on its left: a
// quoted-string in what is parsed may not hold a comma (no proxy writes
// one in for, by, host or proto), which is what lets the parse start at
// the right end and stop at the client's element. An element split by
// such a comma is malformed, hence invalid.
func lastForwarded(lines []string, want int, stop spanCheck, out *members) (chainTooLong bool) {
	out.n, out.client = 0, false
	scan := newChainScan()
	for li := len(lines) - 1; li >= 0 && out.n < want; li-- {
		line := lines[li]
		floor := scan.floor(line)
		end := len(line)
		for {
			if scan.field() {
				return true
			}
			// Find the element's start and its first non-whitespace byte.
			// Whitespace beyond the floor is too long only once the element
			// turns out not to end the walk: before the last element wanted
			// it is the separator's (see lastXFF).
			start, first, beyond := end, end, false
			for start > 0 && line[start-1] != ',' {
				start--
				if !isOWS(line[start]) {
					if start < floor {
						return true
					}
					first = start
				} else if start < floor {
					beyond = true
				}
			}
			if first < end { // not an empty element, which the list syntax ignores
				elem, _, _ := forwardedElement(line[first:end], 0)
				elem.line, elem.offset = li, first
				out.m[out.n] = elem
				out.n++
				if !elem.valid {
					return false
				}
				if fail, client := stop.judge(out); fail || client || out.n == want {
					return false
				}
			}
			if beyond {
				return true
			}
			if start == 0 {
				break
			}
			if start-1 < floor { // the comma
				return true
			}
			end = start - 1
		}
		scan.leave(line)
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
