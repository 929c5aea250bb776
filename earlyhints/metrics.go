package earlyhints

import (
	"github.com/prometheus/client_golang/prometheus"

	edgemetrics "github.com/caddy-edgekit/edgekit/internal/metrics"
)

// The collectors are process-wide so that counts survive a config reload;
// each new config's registry gets the same collectors.
var metrics = newMetrics()

type collectors struct {
	sent, learned, evicted, expired prometheus.Counter
	all                             []prometheus.Collector
}

func newMetrics() (m collectors) {
	const ns, sub = "caddy", "early_hints"
	m.sent = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "hints_sent_total",
		Help: "103 Early Hints responses sent by the PoP before the request went on.",
	})
	m.learned = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "learned_total",
		Help: "Paths whose links were learned or relearned (changed) from a shared-cacheable HTML response.",
	})
	m.evicted = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "evicted_total",
		Help: "Paths evicted from the store to stay within max_paths and max_bytes.",
	})
	m.expired = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "expired_total",
		Help: "Paths dropped from the store because their links were older than max_age.",
	})
	m.all = []prometheus.Collector{m.sent, m.learned, m.evicted, m.expired}
	return m
}

// registerMetrics adds the collectors to a config's registry; registering
// them again (another handler, or a reload) is not an error.
func registerMetrics(reg prometheus.Registerer) error {
	return edgemetrics.RegisterAll(reg, metrics.all...)
}
