// Package adapttest adapts Caddyfiles in tests as `caddy adapt` and
// `caddy validate` do, for the tests of each module package and the shared
// golden tests, which must see the same errors an operator sees.
package adapttest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// Adapt returns the JSON that the Caddyfile adapter makes of caddyfile.
func Adapt(caddyfile string) (string, error) {
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	return string(adapted), err
}

// Validate adapts caddyfile and provisions the result without starting it
// (caddy.Validate), which is what `caddy validate`, `caddy run` and the
// admin /load do before serving: it returns the first refusal of either.
func Validate(caddyfile string) error {
	adapted, err := Adapt(caddyfile)
	if err != nil {
		return err
	}
	var cfg caddy.Config
	if err := json.Unmarshal([]byte(adapted), &cfg); err != nil {
		return err
	}
	return caddy.Validate(&cfg)
}

// HandlerOrder fails the test unless adapted names every handler (by its
// "handler" value) once, in the given order: how a directive's registered
// place in Caddy's order shows in the JSON.
func HandlerOrder(t testing.TB, adapted string, handlers ...string) {
	t.Helper()
	last := -1
	for _, h := range handlers {
		at := strings.Index(adapted, `"handler":"`+h+`"`)
		if at < 0 || at < last {
			t.Fatalf("want handlers %v in that order, got %s", handlers, adapted)
		}
		last = at
	}
}

// SameRefusal fails the test unless a JSON config and its Caddyfile twin
// are both refused, the Caddyfile with the JSON's message (it may add the
// line it points at): one check per bound, whichever way it is written.
func SameRefusal(t testing.TB, caddyfile string, caddyfileErr, jsonErr error) {
	t.Helper()
	switch {
	case jsonErr == nil:
		t.Errorf("JSON twin of Caddyfile %q: accepted", caddyfile)
	case caddyfileErr == nil:
		t.Errorf("Caddyfile %q: accepted", caddyfile)
	case !strings.Contains(caddyfileErr.Error(), jsonErr.Error()):
		t.Errorf("Caddyfile %q and JSON refuse differently:\n  Caddyfile: %v\n  JSON:      %v", caddyfile, caddyfileErr, jsonErr)
	}
}
