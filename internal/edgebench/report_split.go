package edgebench

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"
)

// The split's parts, in the order the bar stacks them (the client's end
// first), with their colours (Paul Tol's colour-blind safe "muted" scheme,
// none of them a CDF series' colour) and the colour of a number written on
// them.
var splitParts = []struct {
	name, color, text string
	get               func(*SplitStats) time.Duration
}{
	{"last mile", "#88CCEE", "#111", func(s *SplitStats) time.Duration { return s.LastMile.P50 }},
	{"PoP", "#DDCC77", "#111", func(s *SplitStats) time.Duration { return s.Edge.P50 }},
	{"origin connect", "#AA4499", "#fff", func(s *SplitStats) time.Duration { return s.OriginConnect.P50 }},
	{"origin", "#117733", "#fff", func(s *SplitStats) time.Duration { return s.Origin.P50 }},
}

// splitChart is the stacked bars of the report's split: one bar per target
// and outcome.
type splitChart struct {
	W, H                       float64
	PlotX, PlotY, PlotW, PlotH float64
	Ticks                      []svgTick
	Bars                       []splitBar
	Legend                     []svgSeries
}

type splitBar struct {
	Label, Empty string
	Y            float64
	Segments     []splitSegment
	TTFB         string
	TTFBX, EndX  float64
}

type splitSegment struct {
	X, W             float64
	Color, TextColor string
	Title, Text      string
}

// splitRow is one line of the split's table; Empty says why there is no
// split.
type splitRow struct {
	Target, Outcome, Empty                           string
	Responses, Without                               int
	TTFB, LastMile, Edge, Connect, Origin, Conn, RTT string
	TLS                                              string
	Disagree                                         bool
}

// split chart geometry
const (
	splitLabelW = 230.0
	splitRowH   = 32.0
	splitRightW = 170.0
)

// splitSection builds the stacked bars and the table of every target's
// split; nil when no outcome has one (no target ran, or none of them
// sent the entries: the section would say only that).
func splitSection(targets []ReportTarget) (*splitChart, []splitRow) {
	type entry struct {
		target, outcome string
		s               *SplitStats
	}
	var entries []entry
	anySplit := false
	for _, t := range targets {
		for _, name := range slices.Sorted(maps.Keys(t.Outcomes)) {
			if s := t.Outcomes[name].Split; s != nil {
				entries = append(entries, entry{t.Name, name, s})
				anySplit = anySplit || s.Responses > 0
			}
		}
	}
	if !anySplit {
		return nil, nil
	}
	c := &splitChart{W: chartW, PlotX: splitLabelW, PlotY: padT, PlotW: chartW - splitLabelW - splitRightW}
	c.PlotH = splitRowH * float64(len(entries))
	c.H = c.PlotY + c.PlotH + 44
	for _, p := range splitParts {
		c.Legend = append(c.Legend, svgSeries{Name: p.name, Color: p.color})
	}
	// One scale for every bar: the longest stack or median TTFB.
	hi := 0.0
	for _, e := range entries {
		if e.s.Responses == 0 {
			continue
		}
		var sum float64
		for _, p := range splitParts {
			sum += splitMS(p.get(e.s))
		}
		hi = math.Max(hi, math.Max(sum, splitMS(e.s.TTFB.P50)))
	}
	if !(hi > 0) {
		hi = 1
	}
	ticks := niceTicks(hi)
	hi = math.Max(hi, ticks[len(ticks)-1])
	x := func(ms float64) float64 { return c.PlotX + c.PlotW*math.Min(ms, hi)/hi }
	for _, v := range ticks {
		c.Ticks = append(c.Ticks, svgTick{x(v), strconv.FormatFloat(v, 'g', 6, 64)})
	}
	var rows []splitRow
	for i, e := range entries {
		label := e.target
		if e.outcome != OutcomeAll {
			label += " · " + e.outcome
		}
		bar := splitBar{Label: label, Y: c.PlotY + splitRowH*float64(i) + 4}
		row := splitRow{Target: e.target, Outcome: e.outcome, Responses: e.s.Responses, Without: e.s.NoServerTiming}
		if e.s.Responses == 0 {
			bar.Empty, row.Empty = "no Server-Timing", "no Server-Timing"
			c.Bars, rows = append(c.Bars, bar), append(rows, row)
			continue
		}
		at := 0.0
		for _, p := range splitParts {
			ms := splitMS(p.get(e.s))
			from, to := x(at), x(at+ms)
			seg := splitSegment{X: from, W: to - from, Color: p.color, TextColor: p.text, Title: fmt.Sprintf("%s: %s ms (median)", p.name, formatMS(p.get(e.s)))}
			// A number where it fits: about 7 units a digit at 11px.
			if text := strconv.FormatFloat(ms, 'f', 0, 64); seg.W >= 7*float64(len(text))+8 {
				seg.Text = text
			}
			if seg.W > 0 {
				bar.Segments = append(bar.Segments, seg)
			}
			at += ms
		}
		bar.EndX = math.Max(x(at), x(splitMS(e.s.TTFB.P50)))
		// The PoP's part is often a pixel wide: its number goes beside
		// the TTFB's.
		bar.TTFBX = x(splitMS(e.s.TTFB.P50))
		bar.TTFB = fmt.Sprintf("%s ms, PoP %s", strconv.FormatFloat(splitMS(e.s.TTFB.P50), 'f', 1, 64), strconv.FormatFloat(splitMS(e.s.Edge.P50), 'f', 2, 64))
		c.Bars = append(c.Bars, bar)

		row.TTFB, row.LastMile, row.Edge = formatMS(e.s.TTFB.P50), formatMS(e.s.LastMile.P50), formatMS(e.s.Edge.P50)
		row.Connect, row.Origin = formatMS(e.s.OriginConnect.P50), formatMS(e.s.Origin.P50)
		row.Conn = fmt.Sprintf("%d / %d", e.s.OriginReused, e.s.OriginNew)
		row.RTT = "-"
		if e.s.RTTCount > 0 {
			row.RTT = formatMS(e.s.RTT.P50)
		}
		row.TLS = tlsList(e.s)
		if e.s.Overrun > 0 {
			row.LastMile += fmt.Sprintf(" (%d with PoP > TTFB)", e.s.Overrun)
		}
		row.Disagree = e.s.TLSDisagree > 0 || e.s.ProtoDisagree > 0
		rows = append(rows, row)
	}
	return c, rows
}

// splitMS is d in milliseconds, never negative or NaN (a bar must not
// draw backwards whatever a server sent).
func splitMS(d time.Duration) float64 {
	ms := float64(d) / float64(time.Millisecond)
	if !(ms > 0) {
		return 0
	}
	return ms
}
