package ratelimit

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
)

func counterValue(t testing.TB, zone, decision string) float64 {
	t.Helper()
	var m dto.Metric
	if err := throttleMetrics.requests.WithLabelValues(zone, decision).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
