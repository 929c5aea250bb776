package caddybrotli

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-edgekit/edgekit/internal/suggest"
)

// UnmarshalCaddyfile sets up the encoder from Caddyfile tokens, inside an
// encode block. Syntax:
//
//	br [<quality>] {
//	    quality <0-11>
//	    window  <10-24>
//	}
//
// `encode br` alone does not call this and gets the defaults from Provision.
func (b *Brotli) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume encoder name
	if d.NextArg() {
		quality, err := parseSetting(d, "quality", checkQuality)
		if err != nil {
			return err
		}
		b.Quality = &quality
	}
	if d.NextArg() {
		return d.ArgErr()
	}

	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "quality":
			if b.Quality != nil {
				return d.Err("br: quality already specified")
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			quality, err := parseSetting(d, "quality", checkQuality)
			if err != nil {
				return err
			}
			b.Quality = &quality
		case "window":
			if b.Window != 0 {
				return d.Err("br: window already specified")
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			window, err := parseSetting(d, "window", checkWindow)
			if err != nil {
				return err
			}
			b.Window = window
		default:
			return suggest.Unknown(d, d.Val(), "br", "", "quality", "window")
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

// parseSetting reads the current token as the named setting, refusing values
// out of range here so that `caddy adapt` already points at the offending line.
func parseSetting(d *caddyfile.Dispenser, name string, check func(int) error) (int, error) {
	value, err := strconv.Atoi(d.Val())
	if err != nil {
		return 0, d.Errf("br: %s %q: not a number", name, d.Val())
	}
	if err := check(value); err != nil {
		return 0, d.Errf("br: %v", err)
	}
	return value, nil
}
