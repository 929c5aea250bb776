package edgebench

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Summary is one figure's distribution as read from its [Histogram]:
// nearest-rank percentiles within HistogramPrecision, the exact maximum,
// and the CDF the HTML report plots (the same numbers, so -json and the
// page agree).
type Summary struct {
	Count                    int
	Mean                     time.Duration
	P50, P90, P99, P999, Max time.Duration
	CDF                      []CDFPoint `json:",omitempty"`
}

// cdfPoints bounds the points of a Summary's CDF.
const cdfPoints = 120

func summarizeHistogram(h *Histogram) Summary {
	return Summary{
		Count: int(h.Count()), Mean: h.Mean(),
		P50: h.Quantile(0.50), P90: h.Quantile(0.90), P99: h.Quantile(0.99), P999: h.Quantile(0.999),
		Max: h.Max(), CDF: h.CDF(cdfPoints),
	}
}

// OutcomeStats is the distribution of the requests of one outcome: a
// class that happened as asked ("new", "resumed", "0rtt"), or what
// happened instead ("not resumed", "0rtt refused"); "all" for a run
// without a mix. Asked is the class the requests asked for.
type OutcomeStats struct {
	Asked                  Class
	Count                  int
	TTFB, Total, Handshake Summary
	// Split is the outcome's TTFB split by the PoP's Server-Timing
	// entries (last mile, PoP, origin), with what the PoP saw of the
	// connections; its NoServerTiming counts responses without them.
	Split *SplitStats
}

// ClassErrors counts failed requests of one asked class (a failed request
// has no outcome: its handshake may not have finished).
type ClassErrors map[Class]int

// outcomeHists are the histograms of one outcome.
type outcomeHists struct {
	asked                  Class
	ttfb, total, handshake Histogram
	split                  splitHists
}

// classAggregate sorts samples into per-outcome histograms and a timeline.
// Its memory is bounded whatever the number of samples. Load runs give
// each worker goroutine's sample to one aggregate under a lock; merge adds
// another aggregate (from another run or worker) into it.
type classAggregate struct {
	mu       sync.Mutex
	start    time.Time
	outcomes map[string]*outcomeHists
	errors   ClassErrors
	timeline timeline
}

func newClassAggregate(start time.Time) *classAggregate {
	return &classAggregate{start: start, outcomes: map[string]*outcomeHists{}, errors: ClassErrors{}}
}

// OutcomeAll holds the requests of a run without a mix (cold or warm).
const OutcomeAll = "all"

func (a *classAggregate) add(s Sample, done time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.timeline.add(done.Sub(a.start), s.Err != nil)
	asked, name := s.Class, s.Outcome
	if asked == "" {
		asked, name = OutcomeAll, OutcomeAll
	}
	if s.Err != nil {
		a.errors[asked]++
		return
	}
	h := a.outcomes[name]
	if h == nil {
		h = &outcomeHists{asked: asked}
		a.outcomes[name] = h
	}
	h.ttfb.Record(s.TTFB)
	h.total.Record(s.Total)
	h.handshake.Record(s.Connect + s.TLS)
	h.split.add(s)
}

// merge adds o's histograms into a (workers counting apart, joined at the
// end).
func (a *classAggregate) merge(o *classAggregate) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	for name, oh := range o.outcomes {
		h := a.outcomes[name]
		if h == nil {
			h = &outcomeHists{asked: oh.asked}
			a.outcomes[name] = h
		}
		h.ttfb.Merge(&oh.ttfb)
		h.total.Merge(&oh.total)
		h.handshake.Merge(&oh.handshake)
		h.split.merge(&oh.split)
	}
	for c, n := range o.errors {
		a.errors[c] += n
	}
	a.timeline.merge(&o.timeline)
}

func (a *classAggregate) summarize() (map[string]*OutcomeStats, ClassErrors, []TimelineSecond) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out map[string]*OutcomeStats
	for _, name := range slices.Sorted(maps.Keys(a.outcomes)) {
		h := a.outcomes[name]
		if out == nil {
			out = map[string]*OutcomeStats{}
		}
		out[name] = &OutcomeStats{
			Asked: h.asked, Count: int(h.total.Count()),
			TTFB: summarizeHistogram(&h.ttfb), Total: summarizeHistogram(&h.total), Handshake: summarizeHistogram(&h.handshake),
			Split: h.split.stats(),
		}
	}
	var errs ClassErrors
	if len(a.errors) > 0 {
		errs = maps.Clone(a.errors)
	}
	return out, errs, a.timeline.seconds()
}

// TimelineSecond is what finished during one second of a run: responses
// and failed requests.
type TimelineSecond struct {
	Second            int
	Completed, Errors int
}

// timelineMax bounds a timeline (a day of seconds); later ones count in
// the last.
const timelineMax = 86400

type timeline struct{ completed, errors []int }

func (t *timeline) add(at time.Duration, failed bool) {
	i := min(max(int(at/time.Second), 0), timelineMax-1)
	for len(t.completed) <= i {
		t.completed, t.errors = append(t.completed, 0), append(t.errors, 0)
	}
	if failed {
		t.errors[i]++
	} else {
		t.completed[i]++
	}
}

func (t *timeline) merge(o *timeline) {
	for i := range o.completed {
		for len(t.completed) <= i {
			t.completed, t.errors = append(t.completed, 0), append(t.errors, 0)
		}
		t.completed[i] += o.completed[i]
		t.errors[i] += o.errors[i]
	}
}

func (t *timeline) seconds() []TimelineSecond {
	var out []TimelineSecond
	for i := range t.completed {
		out = append(out, TimelineSecond{Second: i, Completed: t.completed[i], Errors: t.errors[i]})
	}
	return out
}
