package clientip

import (
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"
)

// expandSecret expands the placeholders of a secret's configured value. Every
// placeholder must resolve to something: `{env.UNSET}abc` would otherwise
// become "abc", a secret anyone can guess, and the edge check would pass for
// whoever sends it.
// what names the option in errors ("secret X-Edge-Secret"); purpose says
// what the environment variable should hold.
func expandSecret(what, value, purpose string) (string, error) {
	if value == "" {
		return "", fmt.Errorf("client_ip: %s: value is empty: give %s, e.g. {env.EDGE_SECRET}", what, purpose)
	}
	expanded, err := caddy.NewReplacer().ReplaceFunc(value, func(key string, val any) (any, error) {
		if caddy.ToString(val) != "" {
			return val, nil
		}
		fix := `write the value literally, or use {env.NAME} or {file./path} (write \{ for a literal brace)`
		if name, ok := strings.CutPrefix(key, "env."); ok {
			fix = "set the environment variable " + name + " before Caddy starts (to " + purpose + ")"
		}
		return nil, fmt.Errorf("client_ip: %s: placeholder {%s} is empty or unset: %s", what, key, fix)
	})
	if err != nil {
		if strings.HasPrefix(err.Error(), "client_ip: ") {
			return "", err
		}
		return "", fmt.Errorf("client_ip: %s: %v", what, err)
	}
	return expanded, nil
}
