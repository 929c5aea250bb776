package clientip

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// provision builds a Handler from its JSON form the way Caddy does:
// unmarshal, Provision, Validate.
func provision(t testing.TB, config string) *Handler {
	t.Helper()
	h, err := tryProvision(config)
	if err != nil {
		t.Fatalf("config %s: %v", config, err)
	}
	t.Cleanup(func() { _ = h.Cleanup() })
	return h
}

func tryProvision(config string) (*Handler, error) {
	h := new(Handler)
	if err := json.Unmarshal([]byte(config), h); err != nil {
		return nil, err
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := h.Provision(ctx); err != nil {
		_ = h.Cleanup() // as Caddy does when provisioning fails
		return nil, err
	}
	if err := h.Validate(); err != nil {
		_ = h.Cleanup()
		return nil, err
	}
	return h, nil
}

// hdr builds an http.Header from name/value pairs; a repeated name adds a
// line.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}
