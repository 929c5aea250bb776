// Package metrics is the one way edgekit's modules register their
// Prometheus collectors.
//
// Each module keeps its collectors in package variables, created once per
// process, so counts survive config reloads. Caddy gives every loaded
// config a new registry, and every handler of that config provisions
// against it: the same collectors are registered into each new registry,
// and again by each further handler of one config. Register makes the
// second case a no-op and any other clash an error that names the metric,
// so a module's Provision can return it instead of panicking.
package metrics

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Register adds c to reg and returns the collector reg holds for c's
// metrics: c when reg did not know them, or the collector registered
// before with the same descriptors (another handler of the same config).
// A descriptor that clashes with a different metric of the same name, or
// a previous collector of another type, is an error naming the metric.
// A nil reg (a context with no metrics registry) registers nothing.
func Register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	if isNil(reg) {
		return c, nil
	}
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if prev, ok := already.ExistingCollector.(T); ok {
			return prev, nil
		}
		return c, fmt.Errorf("%s: already registered by a %T, not a %T: two modules define the same metric", name(c), already.ExistingCollector, c)
	}
	return c, fmt.Errorf("%s: %w", name(c), err)
}

// RegisterAll registers each collector as Register does, stopping at the
// first error.
func RegisterAll(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if _, err := Register(reg, c); err != nil {
			return err
		}
	}
	return nil
}

// isNil reports a nil registry, including a nil *prometheus.Registry in a
// non-nil interface, which is what caddy.Context.GetMetricsRegistry gives
// a context that has none.
func isNil(reg prometheus.Registerer) bool {
	if reg == nil {
		return true
	}
	r, ok := reg.(*prometheus.Registry)
	return ok && r == nil
}

// name gives c's metric name (its first descriptor's) for error messages.
func name(c prometheus.Collector) string {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	s := fmt.Sprintf("%T", c)
	first := true
	for d := range ch { // drained, so Describe never blocks
		if first {
			s, first = fqName(d), false
		}
	}
	return s
}

// fqName extracts the fully-qualified name from d.String(), the only way
// client_golang exposes it; if that format changes, the whole string does.
func fqName(d *prometheus.Desc) string {
	s := d.String()
	if _, rest, ok := strings.Cut(s, "fqName: "); ok {
		if q, err := strconv.QuotedPrefix(rest); err == nil {
			if n, err := strconv.Unquote(q); err == nil {
				return n
			}
		}
	}
	return s
}
