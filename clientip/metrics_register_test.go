package clientip

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A registry that already holds another metric of one of client_ip's
// names is a provisioning error with the module and the metric named.
func TestNewCountersRegistryClashIsError(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "caddy_client_ip_untrusted_total", Help: "someone else's"}))
	_, err := newCounters(reg, "reject")
	if err == nil || !strings.HasPrefix(err.Error(), "client_ip: registering metrics: caddy_client_ip_untrusted_total: ") {
		t.Fatalf("newCounters into a clashing registry = %v, want client_ip: registering metrics: caddy_client_ip_untrusted_total: ...", err)
	}
	// The same registry, twice, with the module's own collectors: fine.
	reg = prometheus.NewPedanticRegistry()
	for range 2 {
		if _, err := newCounters(reg, "reject"); err != nil {
			t.Fatal(err)
		}
	}
}
