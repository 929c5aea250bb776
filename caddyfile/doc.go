// Package caddyfile holds what edgekit's Caddyfile directives share: the
// golden adapt tests across modules (adapt_test.go, testdata/*.caddyfiletest).
// It has no code: each module package registers its own directive and default
// order in its caddyfile.go, as Caddy's own modules do.
package caddyfile
