package clientip

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	edgemetrics "github.com/caddy-edgekit/edgekit/internal/metrics"
)

// The collectors live for the whole process, so counts survive config
// reloads; each new config's registry gets them registered again.
var metrics = newMetrics()

type collectors struct {
	requests  *prometheus.CounterVec
	untrusted *prometheus.CounterVec
}

func newMetrics() (m collectors) {
	const ns, sub = "caddy", "client_ip"
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns,
		Subsystem: sub,
		Name:      "requests_total",
		Help:      "Requests seen by client_ip, by where the client address came from (xff, forwarded, header, signed; peer when not through the edge).",
	}, []string{"source"})
	m.untrusted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns,
		Subsystem: sub,
		Name:      "untrusted_total",
		Help:      "Requests that did not verifiably come through the edge, by reason and by the configured untrusted action.",
	}, []string{"reason", "action"})
	return m
}

// counters are a handler's pre-resolved children, so counting costs no
// label lookup.
type counters struct {
	requests  [numSources]prometheus.Counter
	untrusted [numReasons]prometheus.Counter
}

func newCounters(registry *prometheus.Registry, action string) (*counters, error) {
	// Several client_ip handlers share one registry per config.
	if err := edgemetrics.RegisterAll(registry, metrics.requests, metrics.untrusted); err != nil {
		return nil, fmt.Errorf("client_ip: registering metrics: %w", err)
	}
	c := new(counters)
	for s := range numSources {
		c.requests[s] = metrics.requests.WithLabelValues(s.String())
	}
	for r := reasonNone + 1; r < numReasons; r++ {
		c.untrusted[r] = metrics.untrusted.WithLabelValues(r.String(), action)
	}
	return c, nil
}
