package brotli

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
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
		quality, err := parseQuality(d)
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
			quality, err := parseQuality(d)
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
			window, err := strconv.Atoi(d.Val())
			if err != nil {
				return d.Errf("br: window %q: not a number", d.Val())
			}
			if err := checkWindow(window); err != nil {
				return d.Errf("br: %v", err)
			}
			b.Window = window
		default:
			return d.Errf("br: unknown subdirective %q (want quality or window)", d.Val())
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

// parseQuality reads the current token as a quality, refusing values out of
// range here so that `caddy adapt` already points at the offending line.
func parseQuality(d *caddyfile.Dispenser) (int, error) {
	quality, err := strconv.Atoi(d.Val())
	if err != nil {
		return 0, d.Errf("br: quality %q: not a number", d.Val())
	}
	if err := checkQuality(quality); err != nil {
		return 0, d.Errf("br: %v", err)
	}
	return quality, nil
}
