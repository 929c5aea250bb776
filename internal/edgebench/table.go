package edgebench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// WriteTable prints probe results side by side: a legend naming each target
// A, B, C..., then one row per figure and one column per target, durations
// in milliseconds. With exactly two targets a B/A column gives the ratio.
func WriteTable(w io.Writer, results ...*Result) {
	var legend []string
	for i, r := range results {
		line := fmt.Sprintf("%s  %-7s  %s  %d requests, %d errors", targetName(i), r.Config.Label(), r.Config.URL, len(r.Samples), r.Errors)
		if r.Warmup > 0 {
			line += fmt.Sprintf(" (%d warm-up request excluded)", r.Warmup)
		}
		legend = append(legend, line)
	}
	g := newGrid(len(results))
	g.text("spoken", func(i int) string { return spoken(results[i].Samples) })
	g.text("status", func(i int) string { return statusList(results[i].Statuses) })
	g.text("errors", func(i int) string { return strconv.Itoa(results[i].Errors) })
	g.text("body bytes", func(i int) string { return strconv.FormatInt(results[i].BodyBytes, 10) })
	addFigures(g, results, []figure[*Result]{
		{"dns", func(r *Result) Stats { return r.DNS }, true}, // left out for IP literals
		{"connect", func(r *Result) Stats { return r.Connect }, false},
		{"tls", func(r *Result) Stats { return r.TLS }, false},
		{"handshake", func(r *Result) Stats { return r.Handshake }, false},
		{"ttfb", func(r *Result) Stats { return r.TTFB }, false},
		{"total", func(r *Result) Stats { return r.Total }, false},
	})
	g.serverTiming(func(i int) map[string]TimingStats { return results[i].ServerTiming })
	g.outcomes(func(i int) map[string]*OutcomeStats { return results[i].Outcomes })
	g.split(func(i int) map[string]*OutcomeStats { return results[i].Outcomes })
	writeReport(w, legend, g)
}

// WriteLoadTable prints load results side by side like [WriteTable]; the
// first error message of each kind follows the table.
func WriteLoadTable(w io.Writer, results ...*LoadResult) {
	var legend, notes []string
	for i, r := range results {
		line := fmt.Sprintf("%s  %-7s  %s  %g/s for %v, open loop", targetName(i), r.Config.Label(), r.Config.URL, r.Config.Rate, r.Config.Duration)
		if r.Warmup > 0 {
			line += fmt.Sprintf(" (%d warm-up request excluded)", r.Warmup)
		}
		legend = append(legend, line)
		for _, kind := range slices.Sorted(maps.Keys(r.ErrorExamples)) {
			notes = append(notes, fmt.Sprintf("%s %s error, first: %s", targetName(i), kind, r.ErrorExamples[kind]))
		}
	}
	g := newGrid(len(results))
	g.text("scheduled", func(i int) string { return strconv.Itoa(results[i].Scheduled) })
	g.text("sent", func(i int) string { return strconv.Itoa(results[i].Sent) })
	g.text("send rate /s", func(i int) string { return strconv.FormatFloat(results[i].SendRate, 'f', 1, 64) })
	g.text("max start lag ms", func(i int) string { return formatMS(results[i].MaxStartLag) })
	g.text("completed", func(i int) string { return strconv.Itoa(results[i].Completed) })
	g.text("status", func(i int) string { return statusList(results[i].Statuses) })
	g.text("errors", func(i int) string { return errorList(results[i].Errors, results[i].ErrorKinds) })
	addFigures(g, results, []figure[*LoadResult]{
		{"latency", func(r *LoadResult) Stats { return r.Latency }, false},
		{"ttfb", func(r *LoadResult) Stats { return r.TTFB }, false},
		{"handshake", func(r *LoadResult) Stats { return r.Handshake }, false},
	})
	g.serverTiming(func(i int) map[string]TimingStats { return results[i].ServerTiming })
	g.outcomes(func(i int) map[string]*OutcomeStats { return results[i].Outcomes })
	g.split(func(i int) map[string]*OutcomeStats { return results[i].Outcomes })
	writeReport(w, legend, g)
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}

func writeReport(w io.Writer, legend []string, g *grid) {
	for _, line := range legend {
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w)
	g.write(w)
}

func targetName(i int) string {
	if i < 26 {
		return string(rune('A' + i))
	}
	return "T" + strconv.Itoa(i+1)
}

// grid is a table with a left-aligned label column and right-aligned value
// columns, one per target, plus a ratio column when there are two targets.
type grid struct {
	targets int
	rows    [][]string
}

func newGrid(targets int) *grid {
	head := []string{"ms / count"}
	for i := range targets {
		head = append(head, targetName(i))
	}
	if targets == 2 {
		head = append(head, "B/A")
	}
	return &grid{targets: targets, rows: [][]string{head}}
}

func (g *grid) text(label string, value func(int) string) {
	row := []string{label}
	for i := range g.targets {
		row = append(row, value(i))
	}
	if g.targets == 2 {
		row = append(row, "")
	}
	g.rows = append(g.rows, row)
}

// stats adds a p50, p90 and p99 row for one figure. A nil entry is a target
// that has no such figure.
func (g *grid) stats(name string, all []*Stats) {
	for _, pct := range []struct {
		label string
		get   func(Stats) time.Duration
	}{
		{"p50", func(s Stats) time.Duration { return s.P50 }},
		{"p90", func(s Stats) time.Duration { return s.P90 }},
		{"p99", func(s Stats) time.Duration { return s.P99 }},
	} {
		row := []string{name + " " + pct.label}
		for _, s := range all {
			if s == nil {
				row = append(row, "-")
				continue
			}
			row = append(row, formatMS(pct.get(*s)))
		}
		if g.targets == 2 {
			if all[0] == nil || all[1] == nil {
				row = append(row, "-")
			} else {
				row = append(row, ratio(pct.get(*all[0]), pct.get(*all[1])))
			}
		}
		g.rows = append(g.rows, row)
	}
}

// serverTiming adds rows for every Server-Timing metric any target reported.
func (g *grid) serverTiming(timings func(target int) map[string]TimingStats) {
	names := map[string]bool{}
	for i := range g.targets {
		for name := range timings(i) {
			names[name] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		all := make([]*Stats, g.targets)
		for i := range g.targets {
			if ts, ok := timings(i)[name]; ok {
				all[i] = &ts.Stats
			}
		}
		g.text("server-timing "+name+" n", func(i int) string { return strconv.Itoa(timings(i)[name].Count) })
		g.stats("server-timing "+name, all)
	}
}

// outcomes adds, when any target measured connection classes, each
// outcome's request count and TTFB percentiles up to p99.9 (from its
// histogram). A run without a mix has only "all", already in the table.
func (g *grid) outcomes(outcomes func(target int) map[string]*OutcomeStats) {
	names := map[string]bool{}
	for i := range g.targets {
		for name := range outcomes(i) {
			if name != OutcomeAll {
				names[name] = true
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		g.text("class "+name+" n", func(i int) string {
			if o := outcomes(i)[name]; o != nil {
				return strconv.Itoa(o.Count)
			}
			return "0"
		})
		for _, pct := range []struct {
			label string
			get   func(Summary) time.Duration
		}{
			{"p50", func(s Summary) time.Duration { return s.P50 }},
			{"p90", func(s Summary) time.Duration { return s.P90 }},
			{"p99", func(s Summary) time.Duration { return s.P99 }},
			{"p99.9", func(s Summary) time.Duration { return s.P999 }},
		} {
			g.text("class "+name+" ttfb "+pct.label, func(i int) string {
				if o := outcomes(i)[name]; o != nil {
					return formatMS(pct.get(o.TTFB))
				}
				return "-"
			})
		}
	}
}

// split adds, per outcome, the medians of the TTFB's split by the PoP's
// Server-Timing entries (see [SplitStats]) and what the PoP saw of the
// connections. A target whose responses of that outcome carried none of
// the entries reads "no Server-Timing".
func (g *grid) split(outcomes func(target int) map[string]*OutcomeStats) {
	names := map[string]bool{}
	for i := range g.targets {
		for name, o := range outcomes(i) {
			if o.Split != nil {
				names[name] = true
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		prefix := "split " + name
		if name == OutcomeAll {
			prefix = "split"
		}
		get := func(i int) *SplitStats {
			if o := outcomes(i)[name]; o != nil {
				return o.Split
			}
			return nil
		}
		some := func(f func(*SplitStats) bool) bool {
			for i := range g.targets {
				if s := get(i); s != nil && s.Responses > 0 && f(s) {
					return true
				}
			}
			return false
		}
		if !some(func(*SplitStats) bool { return true }) {
			g.text(prefix, func(i int) string {
				if get(i) == nil {
					return "-"
				}
				return "no Server-Timing"
			})
			continue
		}
		g.text(prefix+" n", func(i int) string {
			s := get(i)
			switch {
			case s == nil:
				return "-"
			case s.Responses == 0:
				return "no Server-Timing"
			case s.NoServerTiming > 0:
				return fmt.Sprintf("%d (%d without)", s.Responses, s.NoServerTiming)
			}
			return strconv.Itoa(s.Responses)
		})
		ms := func(label string, f func(*SplitStats) time.Duration) {
			g.text(prefix+" "+label+" p50", func(i int) string {
				if s := get(i); s != nil && s.Responses > 0 {
					return formatMS(f(s))
				}
				return "-"
			})
		}
		ms("ttfb", func(s *SplitStats) time.Duration { return s.TTFB.P50 })
		ms("last mile", func(s *SplitStats) time.Duration { return s.LastMile.P50 })
		ms("pop", func(s *SplitStats) time.Duration { return s.Edge.P50 })
		if some(func(s *SplitStats) bool { return s.OriginNew > 0 }) {
			ms("origin connect", func(s *SplitStats) time.Duration { return s.OriginConnect.P50 })
		}
		ms("origin", func(s *SplitStats) time.Duration { return s.Origin.P50 })
		if some(func(s *SplitStats) bool { return s.Overrun > 0 }) {
			g.text(prefix+" pop > ttfb", func(i int) string {
				if s := get(i); s != nil && s.Responses > 0 {
					return strconv.Itoa(s.Overrun)
				}
				return "-"
			})
		}
		g.text(prefix+" origin-conn", func(i int) string {
			if s := get(i); s != nil && s.Responses > 0 {
				return fmt.Sprintf("reused %d new %d", s.OriginReused, s.OriginNew)
			}
			return "-"
		})
		if some(func(s *SplitStats) bool { return s.RTTCount > 0 }) {
			g.text(prefix+" pop rtt p50", func(i int) string {
				if s := get(i); s != nil && s.RTTCount > 0 {
					return formatMS(s.RTT.P50)
				}
				return "-"
			})
		}
		g.text(prefix+" pop tls", func(i int) string {
			if s := get(i); s != nil && s.Responses > 0 {
				return tlsList(s)
			}
			return "-"
		})
	}
}

// tlsList is the TLS modes the PoP saw, "resumed 8", and how many of them
// the client disagrees with.
func tlsList(s *SplitStats) string {
	var parts []string
	for _, mode := range slices.Sorted(maps.Keys(s.PoPTLS)) {
		parts = append(parts, fmt.Sprintf("%s %d", mode, s.PoPTLS[mode]))
	}
	out := strings.Join(parts, " ")
	if out == "" {
		out = "-"
	}
	if s.TLSDisagree > 0 {
		out += fmt.Sprintf(" (client disagrees: %d)", s.TLSDisagree)
	}
	if s.ProtoDisagree > 0 {
		out += fmt.Sprintf(" (protocol disagrees: %d)", s.ProtoDisagree)
	}
	return out
}

// figure is one measured duration of a result type.
type figure[R any] struct {
	name  string
	stats func(R) Stats
	// optional figures are left out when they are zero for every target.
	optional bool
}

// addFigures adds the percentile rows of each figure, one column per result.
func addFigures[R any](g *grid, results []R, figures []figure[R]) {
	for _, f := range figures {
		all := make([]*Stats, len(results))
		measured := false
		for i, r := range results {
			s := f.stats(r)
			all[i], measured = &s, measured || s != Stats{}
		}
		if f.optional && !measured {
			continue
		}
		g.stats(f.name, all)
	}
}

func (g *grid) write(w io.Writer) {
	widths := make([]int, len(g.rows[0]))
	for _, row := range g.rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len(cell))
		}
	}
	for _, row := range g.rows {
		var b strings.Builder
		for i, cell := range row {
			if i == 0 {
				b.WriteString(cell + strings.Repeat(" ", widths[0]-len(cell)))
				continue
			}
			b.WriteString("  " + strings.Repeat(" ", widths[i]-len(cell)) + cell)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

func formatMS(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

func ratio(a, b time.Duration) string {
	if a <= 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(b)/float64(a), 'f', 2, 64) + "x"
}

// spoken is the protocol the server answered with, e.g. HTTP/2.0 (the most
// common one if they differ).
func spoken(samples []Sample) string {
	counts := map[string]int{}
	best := "-"
	for _, s := range samples {
		if s.Err == nil {
			counts[s.Proto]++
			if counts[s.Proto] > counts[best] {
				best = s.Proto
			}
		}
	}
	return best
}

func statusList(statuses map[int]int) string {
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(statuses)) {
		parts = append(parts, fmt.Sprintf("%dx%d", code, statuses[code]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func errorList(total int, kinds map[string]int) string {
	if total == 0 {
		return "0"
	}
	var parts []string
	for _, kind := range slices.Sorted(maps.Keys(kinds)) {
		parts = append(parts, fmt.Sprintf("%s %d", kind, kinds[kind]))
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}
