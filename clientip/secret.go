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
func expandSecret(header, value string) (string, error) {
	if value == "" {
		return "", fmt.Errorf("client_ip: secret %s: value is empty: give the edge's secret, e.g. {env.EDGE_SECRET}", header)
	}
	expanded, err := caddy.NewReplacer().ReplaceFunc(value, func(key string, val any) (any, error) {
		if caddy.ToString(val) != "" {
			return val, nil
		}
		fix := `write the value literally, or use {env.NAME} or {file./path} (write \{ for a literal brace)`
		if name, ok := strings.CutPrefix(key, "env."); ok {
			fix = "set the environment variable " + name + " before Caddy starts (to the secret the edge sends)"
		}
		return nil, fmt.Errorf("client_ip: secret %s: placeholder {%s} is empty or unset: %s", header, key, fix)
	})
	if err != nil {
		if strings.HasPrefix(err.Error(), "client_ip: ") {
			return "", err
		}
		return "", fmt.Errorf("client_ip: secret %s: %v", header, err)
	}
	return expanded, nil
}
