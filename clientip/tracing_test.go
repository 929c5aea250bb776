package clientip

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Caddy's tracing runs before client_ip, and OpenTelemetry's HTTP
// instrumentation starts its span with client.address taken from the
// leftmost X-Forwarded-For entry, which any caller writes. client_ip
// replaces it with the resolved client, through the edge or not.
func TestTracingSpanGetsTheClient(t *testing.T) {
	h := provision(t, `{"trusted_proxies":["10.0.0.0/8"]}`)
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	for _, tc := range []struct{ peer, xff, want string }{
		{edgePeer, "6.6.6.6, 203.0.113.7", callerIP},        // through the edge
		{strangers, "6.6.6.6, 203.0.113.7", "198.51.100.1"}, // not: the peer
	} {
		ctx, span := provider.Tracer("test").Start(context.Background(), "request",
			traceStartAttrs(attribute.String("client.address", "6.6.6.6"))) // as otelhttp starts it
		r := httptest.NewRequest(http.MethodGet, "http://example.com/", nil).WithContext(ctx)
		r.RemoteAddr = tc.peer
		r.Header.Set("X-Forwarded-For", tc.xff)
		w := httptest.NewRecorder()
		r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, nil)
		if err := h.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })); err != nil {
			t.Fatal(err)
		}
		span.End()
		ended := recorder.Ended()
		var got string
		for _, kv := range ended[len(ended)-1].Attributes() {
			if kv.Key == "client.address" {
				got = kv.Value.AsString()
			}
		}
		if got != tc.want {
			t.Errorf("peer %s, X-Forwarded-For %q: span client.address %q, want %s", tc.peer, tc.xff, got, tc.want)
		}
	}
}

func traceStartAttrs(kv ...attribute.KeyValue) trace.SpanStartOption {
	return trace.WithAttributes(kv...)
}
