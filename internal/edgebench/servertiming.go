package edgebench

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// ServerTimingMetric is one metric of a Server-Timing header
// (https://www.w3.org/TR/server-timing/), e.g. `cache;dur=12.3;desc="hit"`.
type ServerTimingMetric struct {
	Name string
	// Dur is the dur parameter (milliseconds on the wire); HasDur says
	// whether a valid one was present.
	Dur    time.Duration
	HasDur bool
	Desc   string
}

// maxServerTimingMS bounds an accepted dur (about 11.6 days): anything
// larger is not a timing but garbage, and would overflow a Duration.
const maxServerTimingMS = 1e9

// ParseServerTiming parses Server-Timing header values, each a
// comma-separated list of `name *(;param[=value])`. The header comes from
// the server under test, so the parser takes any bytes: a malformed metric is
// skipped up to the next comma outside a quoted string and the rest still
// count. Of repeated parameters the first wins (as in the spec); a dur that
// is not a plain non-negative decimal number is ignored.
func ParseServerTiming(values ...string) []ServerTimingMetric {
	var metrics []ServerTimingMetric
	for _, v := range values {
		p := stParser{s: v}
		for {
			p.skip(func(c byte) bool { return c == ',' || isOWS(c) })
			if p.done() {
				break
			}
			if m, ok := p.metric(); ok {
				metrics = append(metrics, m)
			} else {
				p.skipMetric()
			}
		}
	}
	return metrics
}

type stParser struct {
	s string
	i int
}

func (p *stParser) done() bool { return p.i >= len(p.s) }

func (p *stParser) skip(match func(byte) bool) {
	for !p.done() && match(p.s[p.i]) {
		p.i++
	}
}

func (p *stParser) token() string {
	start := p.i
	p.skip(isTokenChar)
	return p.s[start:p.i]
}

// metric parses one metric; on false the caller skips the rest of it.
func (p *stParser) metric() (ServerTimingMetric, bool) {
	m := ServerTimingMetric{Name: p.token()}
	if m.Name == "" {
		return m, false
	}
	var seenDur, seenDesc bool
	for {
		p.skip(isOWS)
		if p.done() || p.s[p.i] == ',' {
			return m, true
		}
		if p.s[p.i] != ';' {
			return m, false
		}
		p.i++
		p.skip(isOWS)
		name := p.token()
		if name == "" {
			return m, false
		}
		p.skip(isOWS)
		var value string
		if !p.done() && p.s[p.i] == '=' {
			p.i++
			p.skip(isOWS)
			var ok bool
			if value, ok = p.value(); !ok {
				return m, false
			}
		}
		switch {
		case strings.EqualFold(name, "dur") && !seenDur:
			seenDur = true
			m.Dur, m.HasDur = parseDurMS(value)
		case strings.EqualFold(name, "desc") && !seenDesc:
			seenDesc = true
			m.Desc = value
		}
	}
}

// value reads a token or a quoted string (with backslash escapes).
func (p *stParser) value() (string, bool) {
	if p.done() || p.s[p.i] != '"' {
		return p.token(), true
	}
	var b strings.Builder
	for p.i++; !p.done(); p.i++ {
		switch c := p.s[p.i]; c {
		case '"':
			p.i++
			return b.String(), true
		case '\\':
			p.i++
			if p.done() {
				return "", false
			}
			b.WriteByte(p.s[p.i])
		default:
			b.WriteByte(c)
		}
	}
	return "", false // unterminated
}

// skipMetric moves past the next comma that is not inside a quoted string.
func (p *stParser) skipMetric() {
	quoted := false
	for ; !p.done(); p.i++ {
		switch p.s[p.i] {
		case '\\':
			if quoted {
				p.i++
			}
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				p.i++
				return
			}
		}
	}
}

func parseDurMS(s string) (time.Duration, bool) {
	if s == "" || !(s[0] == '.' || isDigit(s[0])) {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isDigit(c) && !strings.ContainsRune(".eE+-", rune(c)) {
			return 0, false // no hex floats, inf, nan or underscores
		}
	}
	ms, err := strconv.ParseFloat(s, 64)
	if err != nil || ms < 0 || ms > maxServerTimingMS {
		return 0, false
	}
	return time.Duration(math.Round(ms * 1e6)), true
}

// serverTimingDurations sums each metric's dur by name for one response.
func serverTimingDurations(values []string) map[string]time.Duration {
	var durs map[string]time.Duration
	for _, m := range ParseServerTiming(values...) {
		if !m.HasDur {
			continue
		}
		if durs == nil {
			durs = map[string]time.Duration{}
		}
		durs[m.Name] += m.Dur
	}
	return durs
}

func isOWS(c byte) bool   { return c == ' ' || c == '\t' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isTokenChar reports an RFC 9110 tchar.
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', isDigit(c):
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
