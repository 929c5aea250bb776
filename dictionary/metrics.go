package dictionary

import (
	"github.com/prometheus/client_golang/prometheus"

	edgemetrics "github.com/caddy-edgekit/edgekit/internal/metrics"
)

// Reasons a request naming a dictionary (Available-Dictionary) got no
// dictionary-compressed response; each is a label of misses_total.
const (
	missMalformed   = "malformed"    // Available-Dictionary is not one 32-byte sf-binary
	missEncoding    = "encoding"     // Accept-Encoding lists no dictionary coding this handler offers
	missUnknown     = "unknown"      // no such dictionary for this origin (never stored, evicted, or another site's)
	missMismatch    = "mismatch"     // the dictionary's match or match-dest does not select this request
	missCrossOrigin = "cross_origin" // the browser could not read the response (opaque, or CORS not allowed)
	missIneligible  = "ineligible"   // the response is not compressible against it (status, coding, no-transform, method)
	missBusy        = "busy"         // max_encoders responses were being compressed against dictionaries already
)

// The collectors are process-wide so that counts survive a config reload;
// each new config's registry gets the same collectors.
var metrics = newMetrics()

type collectors struct {
	hits       *prometheus.CounterVec
	misses     *prometheus.CounterVec
	bytesSaved prometheus.Counter
	marked     prometheus.Counter
	stored     prometheus.Counter
	evictions  prometheus.Counter
	deltaHits  prometheus.Counter
	storeBytes prometheus.Gauge
	storeDicts prometheus.Gauge
	all        []prometheus.Collector

	missBy map[string]prometheus.Counter
	hitBy  map[string]prometheus.Counter
}

func newMetrics() (m collectors) {
	const ns, sub = "caddy", "dictionary"
	m.hits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "hits_total",
		Help: "Responses sent compressed against a stored dictionary, by content coding (dcz, dcb).",
	}, []string{"encoding"})
	m.misses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "misses_total",
		Help: "Requests naming a dictionary (Available-Dictionary) answered without one, by reason: malformed, encoding, unknown, mismatch, cross_origin, ineligible, busy.",
	}, []string{"reason"})
	m.bytesSaved = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "bytes_saved_total",
		Help: "Identity bytes of dictionary-compressed responses minus the bytes sent for them.",
	})
	m.marked = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "marked_total",
		Help: "Responses sent with Use-As-Dictionary.",
	})
	m.stored = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "stored_total",
		Help: "Bodies of marked responses added to the dictionary store.",
	})
	m.evictions = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "evictions_total",
		Help: "Dictionaries evicted from the store to stay within its size.",
	})
	m.deltaHits = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "delta_cache_hits_total",
		Help: "Dictionary-compressed responses served from the delta cache instead of compressed again.",
	})
	m.storeBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: sub, Name: "store_bytes",
		Help: "Bytes counted by the dictionary stores (dictionaries and their overhead).",
	})
	m.storeDicts = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: sub, Name: "store_dictionaries",
		Help: "Dictionaries held by the dictionary stores.",
	})
	m.missBy = map[string]prometheus.Counter{}
	for _, r := range []string{missMalformed, missEncoding, missUnknown, missMismatch, missCrossOrigin, missIneligible, missBusy} {
		m.missBy[r] = m.misses.WithLabelValues(r)
	}
	m.hitBy = map[string]prometheus.Counter{codingDCZ: m.hits.WithLabelValues(codingDCZ), codingDCB: m.hits.WithLabelValues(codingDCB)}
	m.all = []prometheus.Collector{m.hits, m.misses, m.bytesSaved, m.marked, m.stored, m.evictions, m.deltaHits, m.storeBytes, m.storeDicts}
	return m
}

// registerMetrics adds the collectors to a config's registry; registering
// them again (another handler, or a reload reusing the registry) is not an
// error.
func registerMetrics(reg prometheus.Registerer) error {
	return edgemetrics.RegisterAll(reg, metrics.all...)
}
