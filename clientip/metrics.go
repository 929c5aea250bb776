package clientip

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The collectors live for the whole process, so counts survive config
// reloads; each new config's registry gets them registered again.
var metrics = struct {
	once      sync.Once
	requests  *prometheus.CounterVec
	untrusted *prometheus.CounterVec
}{}

func initMetrics() {
	const ns, sub = "caddy", "client_ip"
	metrics.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns,
		Subsystem: sub,
		Name:      "requests_total",
		Help:      "Requests seen by client_ip, by where the client address came from (xff, forwarded, header; peer when not through the edge).",
	}, []string{"source"})
	metrics.untrusted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns,
		Subsystem: sub,
		Name:      "untrusted_total",
		Help:      "Requests that did not verifiably come through the edge, by reason and by the configured untrusted action.",
	}, []string{"reason", "action"})
}

// counters are a handler's pre-resolved children, so counting costs no
// label lookup.
type counters struct {
	requests  [numSources]prometheus.Counter
	untrusted [numReasons]prometheus.Counter
}

func newCounters(registry *prometheus.Registry, action string) (*counters, error) {
	metrics.once.Do(initMetrics)
	if registry != nil {
		for _, c := range []prometheus.Collector{metrics.requests, metrics.untrusted} {
			// Several client_ip handlers share one registry per config.
			if err := registry.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
				return nil, err
			}
		}
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
