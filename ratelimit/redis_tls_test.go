package ratelimit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-edgekit/edgekit/internal/testredis"
)

func tlsHandler(t testing.TB, addr string, tc *RedisTLS, zone string) *Handler {
	return provision(t, &Handler{
		Zones: []*Zone{{Name: zone, Rate: "1/1h"}},
		Store: &Store{Type: "redis", Redis: &RedisStore{Address: addr, Timeout: caddy.Duration(2 * time.Second), OnError: "deny", TLS: tc}},
	}, nil)
}

func decideOnce(h *Handler) (bool, error) {
	var out [1]outcome
	return h.redis.decide(context.Background(), []requestKey{{text: "k"}}, out[:], nil, allZones)
}

// TestRedisTLS: against a TLS-only redis-server, with the test's CA, then
// with mutual TLS; a wrong CA or a missing client certificate is a clear
// error, counted.
func TestRedisTLS(t *testing.T) {
	ca := testredis.NewCA(t, "good")
	plain := testredis.StartTLS(t, ca, false)
	h := tlsHandler(t, plain.Addr(), &RedisTLS{CA: ca.File}, "r-tls")
	for i, want := range []bool{true, false} {
		if allowed, err := decideOnce(h); err != nil || allowed != want {
			t.Fatalf("decision %d over TLS: allowed %v, error %v; want %v", i, allowed, err, want)
		}
	}

	mutual := testredis.StartTLS(t, ca, true)
	cert, key := ca.Issue("caddy", "")
	h = tlsHandler(t, mutual.Addr(), &RedisTLS{CA: ca.File, Cert: cert, Key: key}, "r-mtls")
	if allowed, err := decideOnce(h); err != nil || !allowed {
		t.Fatalf("mutual TLS: allowed %v, error %v", allowed, err)
	}
	before := testutil.ToFloat64(throttleMetrics.connectErrors)
	h = tlsHandler(t, mutual.Addr(), &RedisTLS{CA: ca.File}, "r-mtls-nocert")
	if _, err := decideOnce(h); err == nil {
		t.Fatal("mutual TLS without a client certificate: decided")
	}

	wrong := testredis.NewCA(t, "wrong")
	h = tlsHandler(t, plain.Addr(), &RedisTLS{CA: wrong.File}, "r-tls-wrong")
	_, err := decideOnce(h)
	if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("wrong CA: %v, want the verification error", err)
	}
	if n := testutil.ToFloat64(throttleMetrics.connectErrors) - before; n < 2 {
		t.Fatalf("connect errors counted: %v, want at least 2 (no client certificate, wrong CA)", n)
	}
}

func TestRedisTLSRefused(t *testing.T) {
	for _, tc := range []struct {
		tls  *RedisTLS
		want string
	}{
		{&RedisTLS{Cert: "c.pem"}, "cert and key go together"},
		{&RedisTLS{Key: "k.pem"}, "cert and key go together"},
		{&RedisTLS{CA: "ca.pem", InsecureSkipVerify: true}, "insecure_skip_verify with ca or server_name"},
		{&RedisTLS{ServerName: "redis.test", InsecureSkipVerify: true}, "insecure_skip_verify with ca or server_name"},
		{&RedisTLS{CA: "/nonexistent/ca.pem"}, "/nonexistent/ca.pem"},
	} {
		h := &Handler{Zones: []*Zone{{Name: "r-tls-refused", Rate: "1/s"}}, Store: &Store{Type: "redis", Redis: &RedisStore{Address: "127.0.0.1:1", TLS: tc.tls}}}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		err := h.Provision(ctx)
		_ = h.Cleanup()
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.tls, err, tc.want)
		}
	}
}
