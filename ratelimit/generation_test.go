package ratelimit

import (
	"context"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

type serverKey struct{}

// TestGenerationIsConfigLifetime: a config generation is the lifetime of
// the config's caddy.Context. Handlers provisioned with contexts derived
// from it by value (the http app adds its server to the context of each
// server's routes) are one generation, so one zone defined two ways is
// refused; a config with a context of its own may redefine the zone.
func TestGenerationIsConfigLifetime(t *testing.T) {
	const name = "generation-lifetime"
	ctx, cancel := newContext()
	defer cancel()
	srv1, srv2 := ctx, ctx
	srv1.Context = context.WithValue(ctx.Context, serverKey{}, "srv1")
	srv2.Context = context.WithValue(ctx.Context, serverKey{}, "srv2")
	provisionIn(t, srv1, &Handler{Zones: []*Zone{{Name: name, Rate: "10/1m"}}}, nil)
	h := &Handler{Zones: []*Zone{{Name: name, Rate: "20/1m"}}}
	err := h.Provision(srv2)
	_ = h.Cleanup()
	if err == nil || !strings.Contains(err.Error(), "defined twice differently") {
		t.Fatalf("zone redefined by another server of the same config: got %v, want a refusal", err)
	}

	next, cancelNext := newContext()
	defer cancelNext()
	provisionIn(t, next, &Handler{Zones: []*Zone{{Name: name, Rate: "20/1m"}}}, nil)
}

// TestGenerationNeedsLifetime: a context that is never canceled is no
// config lifetime; provisioning with one is refused, not silently merged
// with every other such context into one generation.
func TestGenerationNeedsLifetime(t *testing.T) {
	h := &Handler{Zones: []*Zone{{Name: "generation-no-lifetime", Rate: "10/1m"}}}
	err := h.Provision(caddy.Context{Context: context.Background()})
	_ = h.Cleanup()
	if err == nil || !strings.HasPrefix(err.Error(), "throttle: ") {
		t.Fatalf("provision with a context that never ends: got %v, want a throttle: error", err)
	}
}
