package ratelimit

import (
	"github.com/prometheus/client_golang/prometheus"

	edgemetrics "github.com/caddy-edgekit/edgekit/internal/metrics"
)

// Collectors are process-wide so counts survive reloads; each config's
// registry gets them registered once.
var throttleMetrics = newThrottleMetrics()

type collectors struct {
	requests      *prometheus.CounterVec
	storeErrors   prometheus.Counter
	breakerOpen   prometheus.GaugeFunc
	connectErrors prometheus.Counter
	emptyKeys     *prometheus.CounterVec
	inFlight      *prometheus.GaugeVec
	zones         *zoneCollector
}

func newThrottleMetrics() (m collectors) {
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "throttle", Name: "requests_total",
		Help: "Requests decided per zone: allowed (passed every zone), rejected (this zone said no), observed (this zone said no in observe mode, and the request went on), charged (a charge_on zone charged the response).",
	}, []string{"zone", "decision"})
	m.storeErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "throttle", Name: "store_errors_total",
		Help: "Decisions the store could not make (Redis error, timeout or open breaker); on_error applied.",
	})
	m.breakerOpen = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "caddy", Subsystem: "throttle", Name: "store_breaker_open",
		Help: "Redis servers whose breaker is open: decisions go to on_error without asking Redis until a probe succeeds (0 when all are healthy).",
	}, openBreakers)
	m.connectErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "throttle", Name: "store_connect_errors_total",
		Help: "Failed attempts to connect to Redis: refused, TLS (e.g. an unknown CA), AUTH, or the probe script refused (NOPERM).",
	})
	m.emptyKeys = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "throttle", Name: "empty_keys_total",
		Help: "Requests whose key expanded to nothing in a zone, by what on_empty_key did: client_ip (keyed on the caller's address instead), skip (left out of the zone), deny (rejected).",
	}, []string{"zone", "action"})
	m.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "caddy", Subsystem: "throttle", Name: "in_flight",
		Help: "Requests holding a slot of a concurrent zone (all keys together).",
	}, []string{"zone"})
	m.zones = &zoneCollector{}
	return m
}

// zoneCounters are one zone's counters, resolved once at provision so the
// request path does no label lookup.
type zoneCounters struct {
	allowed, rejected, observed, charged prometheus.Counter
	empty                                prometheus.Counter // by the zone's on_empty_key
	inFlight                             prometheus.Gauge   // concurrent zones
}

// registerMetrics adds the collectors to a config's registry; several
// throttle handlers share one registry per config.
func registerMetrics(reg *prometheus.Registry) error {
	m := &throttleMetrics
	return edgemetrics.RegisterAll(reg, m.requests, m.storeErrors, m.breakerOpen, m.connectErrors, m.emptyKeys, m.inFlight, m.zones)
}

func newZoneCounters(zone string, onEmpty OnEmptyKey, concurrent bool) zoneCounters {
	var inFlight prometheus.Gauge
	if concurrent {
		inFlight = throttleMetrics.inFlight.WithLabelValues(zone)
	}
	return zoneCounters{
		empty:    throttleMetrics.emptyKeys.WithLabelValues(zone, string(onEmpty)),
		inFlight: inFlight,
		allowed:  throttleMetrics.requests.WithLabelValues(zone, "allowed"),
		rejected: throttleMetrics.requests.WithLabelValues(zone, "rejected"),
		observed: throttleMetrics.requests.WithLabelValues(zone, "observed"),
		charged:  throttleMetrics.requests.WithLabelValues(zone, "charged"),
	}
}

// zoneCollector reports every memory zone's size at scrape time.
type zoneCollector struct{}

var (
	keysDesc = prometheus.NewDesc("caddy_throttle_keys",
		"Keys held by a memory zone.", []string{"zone"}, nil)
	evictionsDesc = prometheus.NewDesc("caddy_throttle_evictions_total",
		"Live keys a full memory zone dropped to admit new ones (expired keys are dropped first and not counted).", []string{"zone"}, nil)
)

func (*zoneCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- keysDesc
	ch <- evictionsDesc
}

func (*zoneCollector) Collect(ch chan<- prometheus.Metric) {
	zones.Range(func(k, v any) bool {
		rate, slots := v.(*zoneState).memory()
		if rate == nil && slots == nil {
			return true
		}
		n, evictions := 0, uint64(0)
		for _, t := range []*memoryTable{rate, slots} {
			if t != nil {
				n += t.len()
				evictions += t.evictions.Load()
			}
		}
		name := k.(string)
		ch <- prometheus.MustNewConstMetric(keysDesc, prometheus.GaugeValue, float64(n), name)
		ch <- prometheus.MustNewConstMetric(evictionsDesc, prometheus.CounterValue, float64(evictions), name)
		return true
	})
}
