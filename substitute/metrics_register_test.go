package substitute

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A registry that already holds another metric of one of substitute's
// names is a provisioning error naming the metric, not a panic.
func TestRegisterMetricsClashIsError(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "caddy_substitute_panics_total", Help: "someone else's"}))
	err := registerMetrics(reg)
	if err == nil || !strings.Contains(err.Error(), "caddy_substitute_panics_total") {
		t.Fatalf("registerMetrics into a clashing registry = %v, want an error naming caddy_substitute_panics_total", err)
	}
}
