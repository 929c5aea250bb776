package substitute

import (
	"github.com/prometheus/client_golang/prometheus"

	edgemetrics "github.com/caddy-edgekit/edgekit/internal/metrics"
)

// The collectors are process-wide so that counts survive a config reload;
// each new config's registry gets the same collectors (see registerMetrics).
var metrics = newMetrics()

type collectors struct {
	responses      *prometheus.CounterVec
	memoHits       prometheus.Counter
	memoMisses     prometheus.Counter
	memoIneligible prometheus.Counter
	dropped        prometheus.Counter
	rangeRetries   prometheus.Counter
	decodeFailures prometheus.Counter
	panics         prometheus.Counter
	headerFields   *prometheus.CounterVec
	all            []prometheus.Collector

	// Label values resolved once, so counting allocates nothing.
	substituted, skipped, noTransform prometheus.Counter

	headerRewritten, headerInvalid, headerTooLong, headerOverBudget prometheus.Counter
}

func newMetrics() (m collectors) {
	const ns, sub = "caddy", "substitute"
	m.responses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "responses_total",
		Help: "Responses seen by substitute, by result: substituted (body went through the rules; for HEAD, the header GET's would have), skipped (passed untouched: type, status, encoding or method not eligible) or no_transform (eligible, passed untouched because of Cache-Control: no-transform).",
	}, []string{"result"})
	m.memoHits = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "memo_hits_total",
		Help: "Responses streamed without scanning because the same strong ETag matched no rule last time.",
	})
	m.memoMisses = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "memo_misses_total",
		Help: "Substituted responses with a strong ETag that the memo did not know as matching no rule (scanned for every rule).",
	})
	m.memoIneligible = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "memo_ineligible_total",
		Help: "Substituted responses with a strong ETag that the memo may neither remember nor use, as no shared cache would store them: Set-Cookie, Cache-Control private or no-store, or Vary: * (scanned for every rule).",
	})
	m.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "dropped_candidates_total",
		Help: "Match candidates dropped because they would have grown past max_match.",
	})
	m.rangeRetries = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "range_retries_total",
		Help: "Range requests answered with a partial substitutable body, discarded and asked again without Range.",
	})
	m.decodeFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "decode_errors_total",
		Help: "Compressed upstream bodies that failed to decode (the response was cut short).",
	})
	m.panics = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "panics_total",
		Help: "Panics recovered in substitute's own goroutines (decoding a compressed body); each aborted its response and was logged with its stack.",
	})
	m.headerFields = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "header_fields_total",
		Help: "Values of the response fields named in headers that were rewritten or removed, by result: rewritten (some rule matched, sent rewritten), invalid (removed: the rewritten value would hold a control character, such as a CR or LF from a placeholder), too_long (removed: the value as sent by the upstream, or rewritten, is over 64 KiB) or over_budget (removed: reached after the 1 MiB of header rewriting allowed per response was spent). Values no rule matched and sent as they came are not counted.",
	}, []string{"result"})
	m.headerRewritten = m.headerFields.WithLabelValues("rewritten")
	m.headerInvalid = m.headerFields.WithLabelValues("invalid")
	m.headerTooLong = m.headerFields.WithLabelValues("too_long")
	m.headerOverBudget = m.headerFields.WithLabelValues("over_budget")
	m.substituted = m.responses.WithLabelValues("substituted")
	m.skipped = m.responses.WithLabelValues("skipped")
	m.noTransform = m.responses.WithLabelValues("no_transform")
	m.all = []prometheus.Collector{m.responses, m.memoHits, m.memoMisses, m.memoIneligible, m.dropped, m.rangeRetries, m.decodeFailures, m.panics, m.headerFields}
	return m
}

// registerMetrics adds the collectors to a config's registry; registering
// them again (another substitute handler, or a reload reusing the
// registry) is not an error.
func registerMetrics(reg *prometheus.Registry) error {
	return edgemetrics.RegisterAll(reg, metrics.all...)
}
