package edgebench

import (
	"iter"
	"math"
	"slices"
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

// maxServerTiming is maxServerTimingMS as a duration. It bounds a sum of
// durs too (addServerTiming).
const maxServerTiming = maxServerTimingMS * time.Millisecond

// addServerTiming adds d to sum, both at most maxServerTiming, saturating at
// maxServerTiming: a server repeating one name (or filling "(other)") with
// the largest dur 10,000 times would otherwise wrap the int64 of
// nanoseconds to a negative sum. A sum at the bound means "at least that".
func addServerTiming(sum, d time.Duration) time.Duration {
	return min(sum+d, maxServerTiming)
}

// ParseServerTiming parses Server-Timing header values, each a
// comma-separated list of `name *(;param[=value])`. The header comes from
// the server under test, so the parser takes any bytes: a malformed metric is
// skipped up to the next comma outside a quoted string and the rest still
// count. Of repeated parameters the first wins (as in the spec); a dur that
// is not a plain non-negative decimal number is ignored.
func ParseServerTiming(values ...string) []ServerTimingMetric {
	return slices.Collect(serverTimingMetrics(values, everyDesc))
}

// serverTimingMetrics yields the metrics of Server-Timing header values one
// at a time, as ParseServerTiming parses them, so that a caller keeping only
// some of them does not hold a slice of every metric of the response. Names
// are substrings of values. Desc is filled in only for the names desc
// accepts (none when desc is nil); without it a metric costs no allocation
// (unless its dur is quoted with escapes or not a number).
func serverTimingMetrics(values []string, desc func(name string) bool) iter.Seq[ServerTimingMetric] {
	return func(yield func(ServerTimingMetric) bool) {
		for _, v := range values {
			p := stParser{s: v, desc: desc}
			for {
				p.skip(func(c byte) bool { return c == ',' || isOWS(c) })
				if p.done() {
					break
				}
				if m, ok := p.metric(); !ok {
					p.skipMetric()
				} else if !yield(m) {
					return
				}
			}
		}
	}
}

type stParser struct {
	s    string
	i    int
	desc func(name string) bool // the names whose Desc metric fills in; nil for none
}

// everyDesc fills in every metric's Desc.
func everyDesc(string) bool { return true }

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
			m.Dur, m.HasDur = parseDurMS(unescape(value))
		case strings.EqualFold(name, "desc") && !seenDesc:
			seenDesc = true
			if p.desc != nil && p.desc(m.Name) {
				m.Desc = unescape(value)
			}
		}
	}
}

// value reads a token or a quoted string. Of a quoted string it returns the
// text between the quotes with its backslash escapes still in (see
// unescape), so that reading a value allocates nothing.
func (p *stParser) value() (string, bool) {
	if p.done() || p.s[p.i] != '"' {
		return p.token(), true
	}
	start := p.i + 1
	for p.i++; !p.done(); p.i++ {
		switch p.s[p.i] {
		case '"':
			p.i++
			return p.s[start : p.i-1], true
		case '\\':
			p.i++
			if p.done() {
				return "", false
			}
		}
	}
	return "", false // unterminated
}

// unescape undoes the backslash escapes of a quoted string's text as value
// returns it; a token has none.
func unescape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++ // value guarantees a character after each backslash
		}
		b.WriteByte(s[i])
	}
	return b.String()
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

// serverTimingSample reads one response's Server-Timing header values: the
// per-name sums of their durs, for at most maxTimingNames names (see
// timingKey; the rest are summed under timingOther), each sum saturating at
// maxServerTiming; and the PoP's entries the split reads (see [PoPTiming]),
// nil when there are none. It keeps no metric it does not add, and clones
// the names it keeps, so a sample holds neither a metric per entry nor the
// header itself; only the PoP's desc entries are unescaped.
func serverTimingSample(values []string) (map[string]time.Duration, *PoPTiming) {
	return serverTimingAdd(nil, values, true)
}

// serverTimingResponse reads a response's Server-Timing: the header's (as
// serverTimingSample), then the trailer's, whose durs are summed into the
// same names (a PoP sends there what it knows only at the end: edgekit's
// total and substitute). The split reads the header only: it is about the
// time to the first byte, and a trailer comes after the body.
func serverTimingResponse(header, trailer []string) (map[string]time.Duration, *PoPTiming) {
	durs, pop := serverTimingAdd(nil, header, true)
	if len(trailer) > 0 {
		durs, _ = serverTimingAdd(durs, trailer, false)
	}
	return durs, pop
}

// serverTimingAdd adds the durs of values to durs (made when needed) and,
// if split, collects the PoP's entries.
func serverTimingAdd(durs map[string]time.Duration, values []string, split bool) (map[string]time.Duration, *PoPTiming) {
	var pop *PoPTiming
	for m := range serverTimingMetrics(values, popDesc) {
		if split && popName(m.Name) != "" {
			if pop == nil {
				pop = &PoPTiming{}
			}
			pop.add(m)
		}
		if !m.HasDur {
			continue
		}
		if durs == nil {
			durs = map[string]time.Duration{}
		}
		name := timingKey(durs, m.Name)
		if _, ok := durs[name]; !ok {
			name = strings.Clone(name)
		}
		durs[name] = addServerTiming(durs[name], m.Dur)
	}
	return durs, pop
}

// serverTimingDurations is the per-name sums of serverTimingSample.
func serverTimingDurations(values []string) map[string]time.Duration {
	durs, _ := serverTimingSample(values)
	return durs
}

// popDesc says which metrics' desc the split reads.
func popDesc(name string) bool {
	n := popName(name)
	return n == stOriginConn || n == stClient
}

// popName is the split's name for a metric name (case-insensitive), ""
// for a name it does not read. It allocates nothing.
func popName(name string) string {
	if len(name) < len(stRTT) || len(name) > len(stOriginConn) {
		return ""
	}
	for _, n := range [...]string{stEdge, stOrigin, stOriginConn, stOriginDial, stOriginTLS, stClient, stRTT} {
		if strings.EqualFold(name, n) {
			return n
		}
	}
	return ""
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
