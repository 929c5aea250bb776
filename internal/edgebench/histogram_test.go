package edgebench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Every quantile read from the histogram is within HistogramPrecision of
// the nearest-rank value of the sorted samples, for a million samples
// spread over nine orders of magnitude (log-normal, like latencies), and
// Count, Min and Max are exact.
func TestHistogramQuantilesMatchSorting(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 1_000_000
	samples := make([]time.Duration, n)
	var h Histogram
	for i := range samples {
		d := time.Duration(math.Exp(rng.NormFloat64()*3 + 15)) // median ~3.3 ms
		if i%1000 == 0 {
			d = time.Duration(rng.IntN(3000)) // the exact range too
		}
		samples[i] = d
		h.Record(d)
	}
	slices.Sort(samples)
	if h.Count() != n || h.Max() != samples[n-1] {
		t.Fatalf("count %d max %v, want %d and %v", h.Count(), h.Max(), n, samples[n-1])
	}
	for _, q := range []float64{0.000001, 0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999, 1} {
		rank := int(math.Ceil(q*n - 1e-9))
		want := samples[max(rank, 1)-1]
		got := h.Quantile(q)
		if diff := math.Abs(float64(got - want)); diff > float64(want)*HistogramPrecision {
			t.Errorf("q %v: histogram %v, sorted %v: off by %.5f%%, bound %.5f%%", q, got, want, 100*diff/float64(want), 100*HistogramPrecision)
		}
	}
	if got := h.Quantile(1); got != samples[n-1] {
		t.Errorf("p100 %v, want the exact max %v", got, samples[n-1])
	}
}

// Small values are counted exactly, and the bucket arithmetic round-trips
// at every power of two up to the largest duration.
func TestHistogramBuckets(t *testing.T) {
	for v := int64(0); v < 4*histSub; v++ {
		i, _ := bucketIndex(v)
		low, width := bucketRange(i)
		if v < low || v >= low+width {
			t.Fatalf("value %d in bucket %d [%d, %d)", v, i, low, low+width)
		}
		if v < 2*histSub && width != 1 {
			t.Fatalf("value %d below %d: width %d, want exact", v, 2*histSub, width)
		}
	}
	for e := 0; e < 63; e++ {
		for _, v := range []int64{1<<e - 1, 1 << e, 1<<e + 1, math.MaxInt64} {
			i, _ := bucketIndex(v)
			low, width := bucketRange(i)
			if v < low || v-low >= width || i>>histSubBits >= histBlocks {
				t.Fatalf("value %d: bucket %d [%d, +%d), block %d of %d", v, i, low, width, i>>histSubBits, histBlocks)
			}
			if v >= 2*histSub && float64(width) > float64(low)/histSub {
				t.Fatalf("value %d: width %d over 1/%d of %d", v, width, histSub, low)
			}
		}
	}
}

// Merging histograms of parts equals the histogram of the whole.
func TestHistogramMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var whole, a, b, empty Histogram
	for i := range 100_000 {
		d := time.Duration(rng.Int64N(int64(10 * time.Second)))
		whole.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	var merged Histogram
	merged.Merge(&empty)
	merged.Merge(&a)
	merged.Merge(&b)
	merged.Merge(nil)
	if !sameCounts(&merged, &whole) || merged.count != whole.count || merged.min != whole.min || merged.max != whole.max {
		t.Fatalf("merged: count %d min %d max %d; whole: %d %d %d, or bucket counts differ", merged.count, merged.min, merged.max, whole.count, whole.min, whole.max)
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		if merged.Quantile(q) != whole.Quantile(q) {
			t.Errorf("q %v: merged %v, whole %v", q, merged.Quantile(q), whole.Quantile(q))
		}
	}
	if d := merged.Mean() - whole.Mean(); d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("mean: merged %v, whole %v", merged.Mean(), whole.Mean())
	}
}

func sameCounts(a, b *Histogram) bool {
	for i := range a.blocks {
		if (a.blocks[i] == nil) != (b.blocks[i] == nil) {
			return false
		}
		if a.blocks[i] != nil && *a.blocks[i] != *b.blocks[i] {
			return false
		}
	}
	return true
}

// Memory does not grow with the count: ten million samples in one range
// use the blocks of that range only.
func TestHistogramBoundedMemory(t *testing.T) {
	var h Histogram
	for i := range 10_000_000 {
		h.Record(time.Millisecond + time.Duration(i%1000)*time.Microsecond) // 1 ms .. 2 ms
	}
	blocks := 0
	for _, b := range h.blocks {
		if b != nil {
			blocks++
		}
	}
	if blocks > 2 {
		t.Errorf("%d blocks for samples within one power of two, want at most 2", blocks)
	}
}

// The CDF is monotone, bounded in length, and ends at (max, 1).
func TestHistogramCDF(t *testing.T) {
	var h Histogram
	if h.CDF(100) != nil || h.Quantile(0.5) != 0 {
		t.Fatal("an empty histogram has a CDF or a quantile")
	}
	for i := 1; i <= 100_000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	cdf := h.CDF(50)
	if len(cdf) < 10 || len(cdf) > 60 {
		t.Fatalf("%d points for 50 asked", len(cdf))
	}
	for i := 1; i < len(cdf); i++ {
		if cdf[i].Value <= cdf[i-1].Value || cdf[i].Fraction < cdf[i-1].Fraction {
			t.Fatalf("not monotone at %d: %+v then %+v", i, cdf[i-1], cdf[i])
		}
	}
	if last := cdf[len(cdf)-1]; last.Value != h.Max() || last.Fraction != 1 {
		t.Errorf("last point %+v, want (%v, 1)", last, h.Max())
	}
}
