package edgebench

import (
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report gathers results for one self-contained HTML page ([Report.WriteHTML]):
// the latency distribution of every target and outcome as CDFs on a log
// scale, and responses and errors per second. The page draws inline SVG
// built here from the same OutcomeStats and Timeline that -json prints, so
// the two agree; it loads nothing when opened (no script, no font, no
// image from anywhere).
//
// Why hand-written SVG rather than a charting library: the page must work
// offline, and a JS library would have to be inlined (hundreds of KB,
// another dependency to vet); two chart kinds are a few dozen lines of Go
// and render the same in any browser, printable and diffable.
type Report struct {
	Title   string
	Targets []ReportTarget
}

// ReportTarget is one measured target of a report.
type ReportTarget struct {
	Name, Label, URL string
	Outcomes         map[string]*OutcomeStats
	ClassErrors      ClassErrors
	Timeline         []TimelineSecond
}

// AddResult adds a probe result under name (A, B, ... by position if empty).
func (r *Report) AddResult(name string, res *Result) {
	r.Targets = append(r.Targets, ReportTarget{name, res.Config.Label(), res.Config.URL, res.Outcomes, res.ClassErrors, res.Timeline})
}

// AddLoad adds a load result under name (A, B, ... by position if empty).
func (r *Report) AddLoad(name string, res *LoadResult) {
	r.Targets = append(r.Targets, ReportTarget{name, res.Config.Label(), res.Config.URL, res.Outcomes, res.ClassErrors, res.Timeline})
}

// chart geometry, in SVG user units
const (
	chartW, chartH = 900.0, 360.0
	padL, padR     = 70.0, 20.0
	padT, padB     = 20.0, 50.0
)

// palette is colour-blind friendly (Okabe-Ito), then darker repeats.
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442", "#7f3c8d", "#11a579"}

type svgSeries struct {
	Name, Color, Path string
}

type svgTick struct {
	Pos   float64
	Label string
}

type svgChart struct {
	Title, XLabel, YLabel string
	W, H                  float64
	PlotX, PlotY          float64
	PlotW, PlotH          float64
	XTicks, YTicks        []svgTick
	Series                []svgSeries
	Empty                 string
}

type reportRow struct {
	Color, Target, Outcome, Asked string
	Count                         int
	P50, P90, P99, P999, Max      string
	Mismatch                      bool
}

type reportPage struct {
	Title     string
	Generated string
	Targets   []ReportTarget
	Charts    []svgChart
	Rows      []reportRow
	Errors    []string
	Precision string
	Split     *splitChart
	SplitRows []splitRow
}

// WriteHTML writes the report as one HTML page.
func (r *Report) WriteHTML(w io.Writer) error {
	page := reportPage{
		Title:     r.Title,
		Generated: time.Now().UTC().Format(time.RFC3339),
		Targets:   r.Targets,
		Precision: strconv.FormatFloat(100*HistogramPrecision, 'f', 3, 64) + "%",
	}
	for i := range page.Targets {
		if page.Targets[i].Name == "" {
			page.Targets[i].Name = targetName(i)
		}
	}
	type series struct {
		name, color string
		stats       *OutcomeStats
	}
	var all []series
	for _, t := range page.Targets {
		for _, name := range slices.Sorted(maps.Keys(t.Outcomes)) {
			o := t.Outcomes[name]
			color := palette[len(all)%len(palette)]
			all = append(all, series{t.Name + " · " + name, color, o})
			page.Rows = append(page.Rows, reportRow{
				Color: color, Target: t.Name, Outcome: name, Asked: string(o.Asked), Count: o.Count,
				P50: formatMS(o.TTFB.P50), P90: formatMS(o.TTFB.P90), P99: formatMS(o.TTFB.P99), P999: formatMS(o.TTFB.P999), Max: formatMS(o.TTFB.Max),
				Mismatch: name != string(o.Asked),
			})
		}
		for _, c := range slices.Sorted(maps.Keys(t.ClassErrors)) {
			page.Errors = append(page.Errors, fmt.Sprintf("%s: %d failed requests asked as %s", t.Name, t.ClassErrors[c], c))
		}
	}
	for _, fig := range []struct {
		title string
		get   func(*OutcomeStats) Summary
	}{
		{"Time to first byte: cumulative distribution", func(o *OutcomeStats) Summary { return o.TTFB }},
		{"Total (last byte): cumulative distribution", func(o *OutcomeStats) Summary { return o.Total }},
	} {
		var cdfs [][]CDFPoint
		for _, s := range all {
			cdfs = append(cdfs, fig.get(s.stats).CDF)
		}
		chart := cdfChart(fig.title, cdfs)
		for i, s := range all {
			chart.Series[i].Name, chart.Series[i].Color = s.name, s.color
		}
		page.Charts = append(page.Charts, chart)
	}
	page.Charts = append(page.Charts, timelineCharts(page.Targets)...)
	page.Split, page.SplitRows = splitSection(page.Targets)
	return reportTemplate.Execute(w, page)
}

// cdfChart plots each CDF as a step line: x latency in ms on a log scale,
// y the fraction of requests at or below it.
func cdfChart(title string, cdfs [][]CDFPoint) svgChart {
	c := newChart(title, "milliseconds (log scale)", "fraction of requests")
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, cdf := range cdfs {
		for _, p := range cdf {
			ms := math.Max(float64(p.Value)/1e6, 1e-3)
			lo, hi = math.Min(lo, ms), math.Max(hi, ms)
		}
	}
	c.Series = make([]svgSeries, len(cdfs))
	if math.IsInf(lo, 1) {
		c.Empty = "no completed requests"
		return c
	}
	// Whole decades around the data.
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	x := func(ms float64) float64 {
		return c.PlotX + c.PlotW*(math.Log10(math.Max(ms, lo))-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
	}
	y := func(f float64) float64 { return c.PlotY + c.PlotH*(1-f) }
	for d := lo; d <= hi*1.0001; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := d * m; v <= hi*1.0001 {
				c.XTicks = append(c.XTicks, svgTick{x(v), strconv.FormatFloat(v, 'g', 4, 64)})
			}
		}
	}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 0.9, 1} {
		c.YTicks = append(c.YTicks, svgTick{y(f), strconv.FormatFloat(f, 'g', 3, 64)})
	}
	for i, cdf := range cdfs {
		var b strings.Builder
		prev := 0.0
		for j, p := range cdf {
			px := x(float64(p.Value) / 1e6)
			if j == 0 {
				fmt.Fprintf(&b, "M%.1f,%.1f", px, y(0))
			}
			fmt.Fprintf(&b, " L%.1f,%.1f L%.1f,%.1f", px, y(prev), px, y(p.Fraction))
			prev = p.Fraction
		}
		c.Series[i].Path = b.String()
	}
	return c
}

// timelineCharts plots responses per second and errors per second of
// every target over the seconds of its run.
func timelineCharts(targets []ReportTarget) []svgChart {
	var out []svgChart
	for _, kind := range []struct {
		title string
		get   func(TimelineSecond) int
	}{
		{"Responses per second", func(s TimelineSecond) int { return s.Completed }},
		{"Errors per second", func(s TimelineSecond) int { return s.Errors }},
	} {
		c := newChart(kind.title, "seconds since the run started", "per second")
		seconds, peak := 1, 1
		for _, t := range targets {
			seconds = max(seconds, len(t.Timeline))
			for _, s := range t.Timeline {
				peak = max(peak, kind.get(s))
			}
		}
		x := func(s float64) float64 { return c.PlotX + c.PlotW*s/float64(seconds) }
		y := func(v float64) float64 { return c.PlotY + c.PlotH*(1-v/float64(peak)) }
		for _, s := range niceTicks(float64(seconds)) {
			c.XTicks = append(c.XTicks, svgTick{x(s), strconv.FormatFloat(s, 'g', 6, 64)})
		}
		for _, v := range niceTicks(float64(peak)) {
			c.YTicks = append(c.YTicks, svgTick{y(v), strconv.FormatFloat(v, 'g', 6, 64)})
		}
		for i, t := range targets {
			var b strings.Builder
			for j, s := range t.Timeline {
				// a step per second: the count holds over [s, s+1)
				if j == 0 {
					fmt.Fprintf(&b, "M%.1f,%.1f", x(0), y(float64(kind.get(s))))
				}
				fmt.Fprintf(&b, " L%.1f,%.1f L%.1f,%.1f", x(float64(s.Second)), y(float64(kind.get(s))), x(float64(s.Second+1)), y(float64(kind.get(s))))
			}
			c.Series = append(c.Series, svgSeries{Name: t.Name, Color: palette[i%len(palette)], Path: b.String()})
		}
		out = append(out, c)
	}
	return out
}

// niceTicks returns 0 and about five round steps up to top.
func niceTicks(top float64) []float64 {
	step := math.Pow(10, math.Floor(math.Log10(top/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if top/(step*m) <= 6 {
			step *= m
			break
		}
	}
	var out []float64
	for v := 0.0; v <= top*1.0001; v += step {
		out = append(out, v)
	}
	return out
}

func newChart(title, xLabel, yLabel string) svgChart {
	return svgChart{Title: title, XLabel: xLabel, YLabel: yLabel, W: chartW, H: chartH,
		PlotX: padL, PlotY: padT, PlotW: chartW - padL - padR, PlotH: chartH - padT - padB}
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"add":  func(a, b float64) float64 { return a + b },
	"half": func(a float64) float64 { return a / 2 },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; max-width: 960px; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { padding: 3px 10px; border-bottom: 1px solid #ddd; text-align: right; }
td:first-child, th:first-child, td.l, th.l { text-align: left; }
.swatch { display: inline-block; width: 12px; height: 12px; margin-right: 6px; vertical-align: middle; }
.mismatch { color: #b00; font-weight: bold; }
svg { background: #fff; border: 1px solid #ccc; max-width: 100%; height: auto; }
svg text { font: 12px system-ui, sans-serif; fill: #333; }
.grid { stroke: #e4e4e4; } .axis { stroke: #555; }
.legend { margin: 4px 0 0 0; padding: 0; list-style: none; }
.legend li { display: inline-block; margin-right: 16px; }
.note { color: #555; }
svg text.v { font-size: 11px; }
#split td { white-space: nowrap; } #split td.wrap { white-space: normal; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="note">Generated {{.Generated}} by edgebench. Percentiles are nearest-rank, read from histograms within {{.Precision}} of the exact value; maxima are exact. Every request is shown under what really happened to its connection: an outcome other than the class asked for is marked in red.</p>
<h2>Targets</h2>
<table id="targets">
<tr><th>target</th><th class="l">measured</th><th class="l">URL</th></tr>
{{range .Targets}}<tr><td>{{.Name}}</td><td class="l">{{.Label}}</td><td class="l">{{.URL}}</td></tr>
{{end}}</table>
<h2>Time to first byte by target and outcome (ms)</h2>
<table id="outcomes">
<tr><th>series</th><th class="l">outcome</th><th class="l">asked</th><th>requests</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>
{{range .Rows}}<tr><td><span class="swatch" style="background:{{.Color}}"></span>{{.Target}}</td><td class="l{{if .Mismatch}} mismatch{{end}}">{{.Outcome}}</td><td class="l">{{.Asked}}</td><td>{{.Count}}</td><td>{{.P50}}</td><td>{{.P90}}</td><td>{{.P99}}</td><td>{{.P999}}</td><td>{{.Max}}</td></tr>
{{end}}</table>
{{range .Errors}}<p class="mismatch">{{.}}</p>
{{end}}
{{with .Split}}{{$c := .}}
<h2>Where the time to first byte went (median ms, from the PoP's Server-Timing)</h2>
<p class="note">Per target and outcome, each part is its median over the responses that carried the PoP's entries: last mile = the client's TTFB less what the PoP reports (the phone's link, handshakes and the client), PoP = its own time (edge), origin connect = a new upstream connection's dial and TLS, origin = the upstream's time to first byte. Medians of parts need not add up to the median TTFB, marked by the black tick.</p>
<svg class="chart bar" xmlns="http://www.w3.org/2000/svg" width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}" role="img" aria-label="TTFB split">
{{range .Ticks}}<line class="grid" x1="{{.Pos}}" x2="{{.Pos}}" y1="{{$c.PlotY}}" y2="{{add $c.PlotY $c.PlotH}}"/><text x="{{.Pos}}" y="{{add (add $c.PlotY $c.PlotH) 16}}" text-anchor="middle">{{.Label}}</text>
{{end}}{{range .Bars}}<text x="{{add $c.PlotX -8}}" y="{{add .Y 17}}" text-anchor="end">{{.Label}}</text>
{{if .Empty}}<text x="{{add $c.PlotX 6}}" y="{{add .Y 17}}" fill="#777">{{.Empty}}</text>
{{else}}{{$b := .}}{{range .Segments}}<rect x="{{.X}}" y="{{$b.Y}}" width="{{.W}}" height="24" fill="{{.Color}}"><title>{{.Title}}</title></rect>{{if .Text}}<text class="v" x="{{add .X (half .W)}}" y="{{add $b.Y 16}}" text-anchor="middle" style="fill:{{.TextColor}}">{{.Text}}</text>{{end}}
{{end}}<line x1="{{.TTFBX}}" x2="{{.TTFBX}}" y1="{{add .Y -3}}" y2="{{add .Y 27}}" stroke="#000" stroke-width="2"><title>TTFB p50 {{.TTFB}}</title></line><text x="{{add .EndX 6}}" y="{{add .Y 17}}">{{.TTFB}}</text>
{{end}}{{end}}<text x="{{add .PlotX .PlotW}}" y="{{add .H -8}}" text-anchor="end">milliseconds</text>
</svg>
<ul class="legend">{{range .Legend}}<li><span class="swatch" style="background:{{.Color}}"></span>{{.Name}}</li>{{end}}<li><span class="swatch" style="background:#000;width:3px"></span>TTFB p50</li></ul>
<table id="split">
<tr><th>target</th><th class="l">outcome</th><th>split / without</th><th>ttfb</th><th>last mile</th><th>PoP</th><th>origin connect</th><th>origin</th><th>origin reused / new</th><th>PoP rtt</th><th class="l">TLS the PoP saw</th></tr>
{{range $.SplitRows}}<tr><td>{{.Target}}</td><td class="l">{{.Outcome}}</td><td>{{.Responses}} / {{.Without}}</td>{{if .Empty}}<td class="l" colspan="8">{{.Empty}}</td>{{else}}<td>{{.TTFB}}</td><td>{{.LastMile}}</td><td>{{.Edge}}</td><td>{{.Connect}}</td><td>{{.Origin}}</td><td>{{.Conn}}</td><td>{{.RTT}}</td><td class="l wrap{{if .Disagree}} mismatch{{end}}">{{.TLS}}</td>{{end}}</tr>
{{end}}</table>
{{end}}
{{range .Charts}}{{$c := .}}
<h2>{{.Title}}</h2>
<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}" role="img" aria-label="{{.Title}}">
{{range .XTicks}}<line class="grid" x1="{{.Pos}}" x2="{{.Pos}}" y1="{{$c.PlotY}}" y2="{{add $c.PlotY $c.PlotH}}"/><text x="{{.Pos}}" y="{{add (add $c.PlotY $c.PlotH) 16}}" text-anchor="middle">{{.Label}}</text>
{{end}}{{range .YTicks}}<line class="grid" x1="{{$c.PlotX}}" x2="{{add $c.PlotX $c.PlotW}}" y1="{{.Pos}}" y2="{{.Pos}}"/><text x="{{add $c.PlotX -6}}" y="{{add .Pos 4}}" text-anchor="end">{{.Label}}</text>
{{end}}<rect class="axis" x="{{.PlotX}}" y="{{.PlotY}}" width="{{.PlotW}}" height="{{.PlotH}}" fill="none"/>
<text x="{{add .PlotX (add .PlotW -0)}}" y="{{add .H -8}}" text-anchor="end">{{.XLabel}}</text>
<text x="14" y="{{.PlotY}}" transform="rotate(-90 14 {{.PlotY}})" text-anchor="end">{{.YLabel}}</text>
{{range .Series}}{{if .Path}}<path d="{{.Path}}" fill="none" stroke="{{.Color}}" stroke-width="2"><title>{{.Name}}</title></path>
{{end}}{{end}}{{with .Empty}}<text x="{{add $c.PlotX 20}}" y="{{add $c.PlotY 30}}">{{.}}</text>{{end}}
</svg>
<ul class="legend">{{range .Series}}<li><span class="swatch" style="background:{{.Color}}"></span>{{.Name}}</li>{{end}}</ul>
{{end}}
</body>
</html>
`))
