package edgebench

import (
	"slices"
	"time"
)

// percentiles returns nearest-rank percentiles (the smallest value with at
// least p of the samples at or below it); zero for no samples.
func percentiles(d []time.Duration) Stats {
	if len(d) == 0 {
		return Stats{}
	}
	sorted := slices.Clone(d)
	slices.Sort(sorted)
	return Stats{P50: rank(sorted, 50), P90: rank(sorted, 90), P99: rank(sorted, 99)}
}

func rank[T any](sorted []T, p int) T {
	i := (p*len(sorted)+99)/100 - 1 // ceil(p/100*n) - 1
	return sorted[max(i, 0)]
}

func median(values []int64) int64 {
	if len(values) == 0 {
		return 0
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	return rank(sorted, 50)
}

// timingAggregate collects Server-Timing durations per metric name.
type timingAggregate map[string][]time.Duration

func (a timingAggregate) add(durs map[string]time.Duration) {
	for name, d := range durs {
		name = timingKey(a, name)
		a[name] = append(a[name], d)
	}
}

func (a timingAggregate) stats() map[string]TimingStats {
	if len(a) == 0 {
		return nil
	}
	out := make(map[string]TimingStats, len(a))
	for name, durs := range a {
		// In float64, as Histogram sums for its mean: thousands of samples
		// at maxServerTiming would wrap an int64 sum.
		var sum float64
		for _, d := range durs {
			sum += float64(d)
		}
		out[name] = TimingStats{Count: len(durs), Mean: time.Duration(sum / float64(len(durs))), Stats: percentiles(durs)}
	}
	return out
}

// maxTimingNames bounds the Server-Timing metric names kept, per response
// (Sample.ServerTiming) and per run (probe and load): the names come from the
// server under test, and one that sends thousands of names in a response, or
// invents a new name per response, must not grow the client's memory (or a
// -json report) without end. Metrics with further names are counted in the
// "(other)" entry.
const maxTimingNames = 64

// timingOther collects the metrics past maxTimingNames. It is not a token,
// so no metric of the server's is named so.
const timingOther = "(other)"

// timingKey is the name under which m, a per-name collection of Server-Timing
// metrics, keeps one named name: the name itself if m has it or holds fewer
// than maxTimingNames other names, else timingOther (which takes no name's
// place, so a response's first 64 names stay named in the run's). It is the
// one cap of every such collection.
func timingKey[V any](m map[string]V, name string) string {
	if _, ok := m[name]; ok {
		return name
	}
	named := len(m)
	if _, ok := m[timingOther]; ok {
		named--
	}
	if named < maxTimingNames {
		return name
	}
	return timingOther
}

// timingHistograms collects Server-Timing durations per metric name in
// histograms, for load runs of any length.
type timingHistograms map[string]*Histogram

func (a timingHistograms) add(durs map[string]time.Duration) {
	for name, d := range durs {
		name = timingKey(a, name)
		h := a[name]
		if h == nil {
			h = &Histogram{}
			a[name] = h
		}
		h.Record(d)
	}
}

func (a timingHistograms) stats() map[string]TimingStats {
	if len(a) == 0 {
		return nil
	}
	out := make(map[string]TimingStats, len(a))
	for name, h := range a {
		out[name] = TimingStats{Count: int(h.Count()), Mean: h.Mean(), Stats: histogramStats(h)}
	}
	return out
}
