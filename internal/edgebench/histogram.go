package edgebench

import (
	"math"
	"math/bits"
	"time"
)

// Histogram counts durations in log-linear buckets, so a run of millions of
// requests keeps its tail (p99.9, the maximum) in bounded memory.
//
// Invariants (tested in histogram_test.go):
//   - Count is exact, and so are Min and Max.
//   - A quantile is the nearest-rank sample's bucket midpoint, clamped to
//     [Min, Max]: within HistogramPrecision of the value sorting every
//     sample would give (relative error at most 1/2048, better than three
//     significant digits). Durations below 2048 ns are counted exactly.
//   - Merging two histograms gives the histogram of both sample sets
//     (bucket counts add), so workers can count apart and merge at the end.
//   - Memory: one 8 KiB block per power of two actually seen, at most 54
//     blocks (every duration from 1 ns to 292 years), whatever the count.
//
// Why not a library: HdrHistogram's Go port is not in Caddy's dependency
// graph, and the log-linear scheme it uses is 60 lines here.
type Histogram struct {
	blocks   [histBlocks]*[histSub]uint64
	count    uint64
	sum      float64 // nanoseconds, for the mean
	min, max int64
}

const (
	histSubBits = 10
	histSub     = 1 << histSubBits // buckets per power of two
	// histBlocks covers indexes up to bucketIndex(math.MaxInt64).
	histBlocks = (63 - histSubBits) + 1 + 1
)

// HistogramPrecision is the largest relative error of a quantile read from
// a [Histogram]: half a bucket, whose width is at most 1/1024 of its lower
// bound.
const HistogramPrecision = 1.0 / (2 * histSub)

// bucketIndex: values below 2*histSub map to themselves; above, the top
// histSubBits+1 bits of the value select the bucket, so a bucket's width is
// 2^shift and its lower bound at least histSub*2^shift.
func bucketIndex(v int64) (index int, shift uint) {
	u := uint64(v)
	if e := bits.Len64(u) - 1; e > histSubBits {
		shift = uint(e - histSubBits)
	}
	return int(shift)<<histSubBits + int(u>>shift), shift
}

// bucketRange is the smallest value of bucket index and its width.
func bucketRange(index int) (low, width int64) {
	if index < 2*histSub {
		return int64(index), 1
	}
	shift := uint(index>>histSubBits) - 1
	mant := int64(index&(histSub-1)) | histSub
	return mant << shift, 1 << shift
}

// Record counts one duration (negative ones as 0).
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	i, _ := bucketIndex(v)
	b := h.blocks[i>>histSubBits]
	if b == nil {
		b = new([histSub]uint64)
		h.blocks[i>>histSubBits] = b
	}
	b[i&(histSub-1)]++
	if h.count == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	h.count++
	h.sum += float64(v)
}

// Merge adds o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.count == 0 {
		return
	}
	for i, ob := range o.blocks {
		if ob == nil {
			continue
		}
		if h.blocks[i] == nil {
			h.blocks[i] = new([histSub]uint64)
		}
		for j, n := range ob {
			h.blocks[i][j] += n
		}
	}
	if h.count == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.count += o.count
	h.sum += o.sum
}

// Count is the number of recorded samples.
func (h *Histogram) Count() uint64 { return h.count }

// Max is the largest recorded sample, exactly (0 when empty).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean is the average of the recorded samples (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.count))
}

// Quantile returns the nearest-rank q-quantile (0 < q <= 1): the smallest
// sample with at least q of the samples at or below it, to within
// HistogramPrecision. 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q*float64(h.count) - 1e-9))
	rank = min(max(rank, 1), h.count)
	var seen uint64
	for bi, b := range h.blocks {
		if b == nil {
			continue
		}
		for j, n := range b {
			if seen += n; n > 0 && seen >= rank {
				low, width := bucketRange(bi<<histSubBits | j)
				mid := low + (width-1)/2
				return time.Duration(min(max(mid, h.min), h.max))
			}
		}
	}
	return time.Duration(h.max)
}

// CDFPoint is one step of a cumulative distribution: Fraction of the
// samples took at most Value.
type CDFPoint struct {
	Value    time.Duration
	Fraction float64
}

// CDF returns at most about points steps of the distribution, spaced evenly
// in log(value), always ending at (Max, 1): enough for a plot, and the same
// points whether the run had a thousand samples or ten million.
func (h *Histogram) CDF(points int) []CDFPoint {
	if h.count == 0 || points < 2 {
		return nil
	}
	lo, hi := math.Log(float64(max(h.min, 1))), math.Log(float64(max(h.max, 1)))
	step := (hi - lo) / float64(points-1)
	var out []CDFPoint
	var seen uint64
	next := lo
	for bi, b := range h.blocks {
		if b == nil {
			continue
		}
		for j, n := range b {
			if n == 0 {
				continue
			}
			seen += n
			low, width := bucketRange(bi<<histSubBits | j)
			v := min(max(low+width-1, h.min), h.max)
			if seen == h.count || math.Log(float64(max(v, 1))) >= next {
				out = append(out, CDFPoint{Value: time.Duration(v), Fraction: float64(seen) / float64(h.count)})
				next = math.Log(float64(max(v, 1))) + step
			}
		}
	}
	return out
}
