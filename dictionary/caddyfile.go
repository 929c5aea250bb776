package dictionary

import (
	"math"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
)

// The directive registers itself with its package, so building Caddy with
// this package alone gives it. Its default order is right after encode:
// inside encode's writer, it sees the body before encode would compress
// it, and encode passes a body that already has a Content-Encoding
// untouched. (With substitute in the same route, see docs/dictionary.md.)
func init() {
	httpcaddyfile.RegisterHandlerDirective("dictionary", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("dictionary", httpcaddyfile.After, "encode")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	if err := m.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return m, nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
// A first argument starting with "/" is the route's path matcher (Caddy
// reads it so before this runs): write the pattern in the block, or after
// a matcher (`dictionary /assets/* /assets/app.*.js`).
//
//	dictionary [<matcher>] [<match-pattern>] {
//	    match <pattern>                  # path with * wildcards, e.g. /assets/app.*.js
//	    match_dest <destination> ...     # e.g. script style; default any
//	    id <id>
//	    encodings dcz|dcb ...            # in order of preference; default dcz dcb
//	    max_size <size>                  # default 4MiB
//	    store_size <size>                # default 64MiB
//	    delta_cache_size <size>|off      # default 16MiB
//	    zstd_level fastest|default|better|best
//	    dcb_quality <2-11>               # default 5
//	    dcb_window <10-24>               # default 20
//	    max_encoders <n>                 # responses compressed at once; default 32
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		h.Match = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	for d.NextBlock(0) {
		opt := d.Val()
		args := d.RemainingArgs()
		one := func() (string, error) {
			if len(args) != 1 {
				return "", d.Errf("dictionary: %s: want one value, got %d", opt, len(args))
			}
			return args[0], nil
		}
		switch opt {
		case "match":
			if h.Match != "" {
				return d.Err("dictionary: match already specified")
			}
			v, err := one()
			if err != nil {
				return err
			}
			h.Match = v
		case "match_dest":
			if len(args) == 0 {
				return d.ArgErr()
			}
			h.MatchDest = append(h.MatchDest, args...)
		case "id":
			v, err := one()
			if err != nil {
				return err
			}
			h.ID = v
		case "encodings":
			if len(args) == 0 {
				return d.ArgErr()
			}
			h.Encodings = args
		case "max_size", "store_size", "delta_cache_size":
			v, err := one()
			if err != nil {
				return err
			}
			if opt == "delta_cache_size" && v == "off" {
				h.DeltaCacheSize = DeltaCacheOff
				continue
			}
			size, err := humanize.ParseBytes(v)
			if err != nil || size == 0 {
				return d.Errf("dictionary: %s %q: must be a size such as 4MiB", opt, v)
			}
			n := int64(min(size, math.MaxInt64))
			switch opt {
			case "max_size":
				h.MaxSize = n
			case "store_size":
				h.StoreSize = n
			default:
				h.DeltaCacheSize = n
			}
		case "zstd_level":
			v, err := one()
			if err != nil {
				return err
			}
			h.ZstdLevel = ZstdLevel(strings.ToLower(v))
		case "dcb_quality", "dcb_window", "max_encoders":
			v, err := one()
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				return d.Errf("dictionary: %s %q: not a number", opt, v)
			}
			switch opt {
			case "dcb_quality":
				h.DCBQuality = n
			case "dcb_window":
				h.DCBWindow = n
			default:
				h.MaxEncoders = n
			}
		default:
			return d.Errf("dictionary: unknown subdirective %q (want match, match_dest, id, encodings, max_size, store_size, delta_cache_size, zstd_level, dcb_quality, dcb_window or max_encoders)", opt)
		}
	}
	return nil
}

// Interface guard.
var _ caddyfile.Unmarshaler = (*Handler)(nil)
