package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func counter(help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "edgekit_test_total", Help: help})
}

func TestRegisterTwiceReturnsFirst(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	first, second := counter("h"), counter("h")
	got, err := Register(reg, first)
	if err != nil || got != first {
		t.Fatalf("first Register = %v, %v; want the collector itself", got, err)
	}
	got, err = Register(reg, second)
	if err != nil {
		t.Fatalf("second Register of the same metric: %v", err)
	}
	if got != first {
		t.Fatal("second Register did not return the collector registered first")
	}
	// Counting through what Register returned is what reg exports.
	got.Inc()
	if n := testutil.ToFloat64(first); n != 1 {
		t.Fatalf("first = %v, want 1", n)
	}
}

func TestRegisterOtherRegistryGetsItsOwn(t *testing.T) {
	a, b := prometheus.NewPedanticRegistry(), prometheus.NewPedanticRegistry()
	first, second := counter("h"), counter("h")
	if _, err := Register(a, first); err != nil {
		t.Fatal(err)
	}
	got, err := Register(b, second)
	if err != nil || got != second {
		t.Fatalf("Register into another registry = %v, %v; want its own collector", got, err)
	}
	// Each registry answers with the collector it holds.
	if got, err := Register(b, first); err != nil || got != second {
		t.Fatalf("Register(b, first) = %v, %v; want b's own collector", got, err)
	}
	if got, err := Register(a, second); err != nil || got != first {
		t.Fatalf("Register(a, second) = %v, %v; want a's own collector", got, err)
	}
}

func TestRegisterConflictIsErrorWithName(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if _, err := Register(reg, counter("one help")); err != nil {
		t.Fatal(err)
	}
	_, err := Register(reg, counter("another help"))
	if err == nil {
		t.Fatal("a metric re-registered with a different help string: no error")
	}
	if !strings.HasPrefix(err.Error(), "edgekit_test_total: ") {
		t.Fatalf("error does not start with the metric's name: %v", err)
	}

	// Same descriptor, other collector type: returning the existing one as
	// T is impossible, so it is an error, not a panic.
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgekit_test_total", Help: "one help"}, nil)
	_, err = Register(reg, vec)
	if err == nil || !strings.Contains(err.Error(), "edgekit_test_total") || !strings.Contains(err.Error(), "*prometheus.CounterVec") {
		t.Fatalf("type clash: got %v, want an error naming the metric and the types", err)
	}
}

func TestRegisterNilRegistry(t *testing.T) {
	c := counter("h")
	var typed *prometheus.Registry // what caddy.Context gives without a registry
	for _, reg := range []prometheus.Registerer{nil, typed} {
		if got, err := Register(reg, c); err != nil || got != c {
			t.Fatalf("Register(%#v) = %v, %v; want c, nil", reg, got, err)
		}
	}
}

func TestRegisterAllStopsAtFirstError(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if err := RegisterAll(reg, counter("one help")); err != nil {
		t.Fatal(err)
	}
	later := prometheus.NewCounter(prometheus.CounterOpts{Name: "edgekit_later_total", Help: "h"})
	if err := RegisterAll(reg, counter("one help"), counter("another help"), later); err == nil {
		t.Fatal("RegisterAll with a clash: no error")
	}
	if reg.Unregister(later) {
		t.Fatal("RegisterAll went on after an error")
	}
	if err := RegisterAll(reg, counter("one help"), later); err != nil {
		t.Fatalf("RegisterAll of the same metrics again: %v", err)
	}
}
