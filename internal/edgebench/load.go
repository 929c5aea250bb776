package edgebench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
)

// LoadConfig is an open-loop run: Rate requests per second for Duration.
type LoadConfig struct {
	Config
	// Rate is requests per second, started on schedule whatever the
	// responses do.
	Rate float64
	// Duration is how long requests are started; in-flight ones are then
	// waited for (each bounded by Timeout).
	Duration time.Duration
	// Progress, if set, gets one line a second while the run lasts.
	Progress io.Writer `json:"-"`
}

// LoadResult summarises a load run. Latency and TTFB are measured from each
// request's scheduled start, so time a request spent waiting because the
// client fell behind counts against the server, as the user would see it.
type LoadResult struct {
	Config LoadConfig
	// Warmup is how many unmeasured requests opened the shared connection
	// before the schedule started (1 in warm mode).
	Warmup int
	// Scheduled is floor(Rate*Duration); Sent how many were started (fewer
	// only when ctx ended the run early).
	Scheduled, Sent int
	// Completed responses (any status; Statuses as in [Result]), Errors (no response or a broken
	// body), by kind: timeout, refused, reset, tls, body, canceled, other.
	Completed, Errors int
	ErrorKinds        map[string]int
	// ErrorExamples holds the first message seen of each kind.
	ErrorExamples map[string]string
	Statuses      map[int]int
	// SendRate is the rate requests were actually started at (0 for a
	// single request); Elapsed runs
	// from the first scheduled start to the last response.
	SendRate float64
	Elapsed  time.Duration
	// MaxStartLag is how far behind its schedule the latest request was
	// started: large values mean the client, not the server, was the limit.
	MaxStartLag time.Duration

	// Percentiles are over the completed requests; the others are counted
	// in Errors. Handshake is Connect+TLS per request (0 on a reused
	// connection).
	Latency, TTFB, Connect, TLS, Handshake Stats
	ServerTiming                           map[string]TimingStats
	// LatencyP999 is the 99.9th percentile of Latency. Load percentiles
	// come from histograms (within HistogramPrecision), so memory stays
	// bounded at any rate and duration.
	LatencyP999 time.Duration
	// Outcomes, ClassErrors and Timeline: as in [Result].
	Outcomes    map[string]*OutcomeStats `json:",omitempty"`
	ClassErrors ClassErrors              `json:",omitempty"`
	Timeline    []TimelineSecond
}

// Load runs cfg open loop and returns when every started request has
// finished. Ending ctx stops the schedule early.
func Load(ctx context.Context, cfg LoadConfig) (*LoadResult, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if !(cfg.Rate > 0) || math.IsInf(cfg.Rate, 0) {
		return nil, fmt.Errorf("edgebench: rate %v: must be a positive number of requests per second", cfg.Rate)
	}
	if cfg.Duration <= 0 {
		return nil, fmt.Errorf("edgebench: duration %v: must be positive", cfg.Duration)
	}
	res := &LoadResult{Config: cfg, Scheduled: int(math.Floor(cfg.Rate*cfg.Duration.Seconds() + 1e-9))}
	if res.Scheduled < 1 {
		return nil, fmt.Errorf("edgebench: rate %v for %v schedules no request: raise the rate or the duration", cfg.Rate, cfg.Duration)
	}

	conns, err := openConnections(ctx, &cfg.Config)
	if err != nil {
		return nil, err
	}
	defer conns.close()
	res.Warmup = conns.warmup

	start := time.Now()
	agg := &loadAggregate{timings: timingHistograms{}, res: res}
	for range loadShards {
		agg.classes = append(agg.classes, newClassAggregate(start))
	}
	stopProgress := ReportEvery(cfg.Progress, time.Second, agg.progressLine)
	var wg sync.WaitGroup
	lastStart := start
	timer := time.NewTimer(0)
	<-timer.C
schedule:
	for i := range res.Scheduled {
		if ctx.Err() != nil {
			break
		}
		due := start.Add(time.Duration(float64(i) * float64(time.Second) / cfg.Rate))
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				break schedule
			}
		}
		lastStart = time.Now()
		res.MaxStartLag = max(res.MaxStartLag, lastStart.Sub(due))
		agg.started()
		class := conns.pick()
		wg.Go(func() {
			c, done := conns.client(class)
			defer done()
			agg.add(c.do(ctx, &cfg.Config, class, due))
		})
	}
	wg.Wait()
	stopProgress()
	res.Elapsed = time.Since(start)
	// n starts on schedule span n-1 intervals.
	if window := lastStart.Sub(start); res.Sent > 1 && window > 0 {
		res.SendRate = float64(res.Sent-1) / window.Seconds()
	}
	agg.summarize()
	return res, ctx.Err()
}

// loadAggregate collects samples from the request goroutines into
// histograms: memory does not grow with the number of requests.
type loadAggregate struct {
	mu                                     sync.Mutex
	res                                    *LoadResult
	inFlight                               int
	latency, ttfb, connect, tls, handshake Histogram
	recent                                 Histogram // latencies since the last progress line
	timings                                timingHistograms
	// classes are per-outcome histograms in shards, each with its own
	// lock, so request goroutines rarely wait on each other; summarize
	// merges them.
	classes []*classAggregate
	next    atomic.Uint64 // picks the shard of the next sample
}

// loadShards is how many class aggregates a load run spreads its samples
// over.
const loadShards = 8

func (a *loadAggregate) started() {
	a.mu.Lock()
	a.res.Sent++
	a.inFlight++
	a.mu.Unlock()
}

func (a *loadAggregate) add(s Sample) {
	a.classes[(a.next.Add(1)-1)%uint64(len(a.classes))].add(s, time.Now())
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inFlight--
	if s.Err != nil {
		r := a.res
		kind := errorKind(s.Err)
		if r.ErrorKinds == nil {
			r.ErrorKinds, r.ErrorExamples = map[string]int{}, map[string]string{}
		}
		if r.ErrorKinds[kind] == 0 {
			r.ErrorExamples[kind] = s.Err.Error()
		}
		r.ErrorKinds[kind]++
		r.Errors++
		return
	}
	if a.res.Statuses == nil {
		a.res.Statuses = map[int]int{}
	}
	a.res.Statuses[statusKey(s.Status)]++
	a.res.Completed++
	a.latency.Record(s.Total)
	a.recent.Record(s.Total)
	a.ttfb.Record(s.TTFB)
	a.connect.Record(s.Connect)
	a.tls.Record(s.TLS)
	a.handshake.Record(s.Connect + s.TLS)
	a.timings.add(s.ServerTiming)
}

func (a *loadAggregate) summarize() {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.res
	r.Latency, r.TTFB = histogramStats(&a.latency), histogramStats(&a.ttfb)
	r.Connect, r.TLS, r.Handshake = histogramStats(&a.connect), histogramStats(&a.tls), histogramStats(&a.handshake)
	r.LatencyP999 = a.latency.Quantile(0.999)
	r.ServerTiming = a.timings.stats()
	merged := a.classes[0]
	for _, shard := range a.classes[1:] {
		merged.merge(shard)
	}
	r.Outcomes, r.ClassErrors, r.Timeline = merged.summarize()
}

func histogramStats(h *Histogram) Stats {
	return Stats{P50: h.Quantile(0.5), P90: h.Quantile(0.9), P99: h.Quantile(0.99)}
}

// progressLine is the load run's line for ReportEvery: counts so far and
// the latencies of the last second.
func (a *loadAggregate) progressLine(elapsed time.Duration) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, stats := a.res, histogramStats(&a.recent)
	done := a.recent.Count()
	a.recent = Histogram{}
	return fmt.Sprintf("%5.0fs  sent %d/%d  done %d  errors %d  in flight %d  last 1s: %d done, p50 %sms p99 %sms",
		elapsed.Seconds(), r.Sent, r.Scheduled, r.Completed, r.Errors, a.inFlight,
		done, formatMS(stats.P50), formatMS(stats.P99))
}

// ReportEvery writes line(time since the call) and a newline to w every
// interval until the returned stop is called; stop waits for a line being
// written. A nil w writes nothing.
func ReportEvery(w io.Writer, interval time.Duration, line func(elapsed time.Duration) string) (stop func()) {
	if w == nil {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				io.WriteString(w, line(now.Sub(start))+"\n")
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// errorKind sorts a failed request into a few kinds worth counting apart.
func errorKind(err error) string {
	var netErr net.Error
	var certErr *tls.CertificateVerificationError
	var alert tls.AlertError
	var recordErr tls.RecordHeaderError
	var quicErr *quic.TransportError
	switch {
	case errors.Is(err, errBody):
		return "body"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "reset"
	case errors.As(err, &certErr), errors.As(err, &alert), errors.As(err, &recordErr),
		errors.As(err, &quicErr) && quicErr.ErrorCode.IsCryptoError(),
		strings.Contains(err.Error(), "tls: "): // alerts from the peer have no exported type
		return "tls"
	}
	return "other"
}
