package dictionary

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/caddy-edgekit/edgekit/internal/suggest"
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

// subdirectives are the options of the directive's block.
var subdirectives = []string{"match", "match_dest", "id", "encodings", "max_size", "store_size", "delta_cache_size", "zstd_level", "dcb_quality", "dcb_window", "max_encoders", "encoder_write_idle", "encoder_min_rate"}

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
//	    encoder_write_idle <duration>    # a write holding an encoder may stall; default 10s
//	    encoder_min_rate <size>          # per second, past the first encoder_write_idle; default none
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		h.Match = d.Val()
		if err := checkPattern(h.Match); err != nil {
			return d.Errf("dictionary: %v", err)
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	for d.NextBlock(0) {
		opt := d.Val()
		args := d.RemainingArgs()
		if !slices.Contains(subdirectives, opt) {
			return suggest.Unknown(d, opt, "dictionary", "", subdirectives...)
		}
		if opt != "match_dest" && opt != "encodings" && len(args) != 1 {
			return d.Errf("dictionary: %s: want one value, got %d", opt, len(args))
		}
		var err error // the value refused by its check (options.go)
		switch opt {
		case "match":
			if h.Match != "" {
				return d.Err("dictionary: match already specified")
			}
			h.Match = args[0]
			err = checkPattern(h.Match)
		case "match_dest":
			if len(args) == 0 {
				return d.ArgErr()
			}
			h.MatchDest = append(h.MatchDest, args...)
			err = checkMatchDest(h.MatchDest)
		case "id":
			h.ID = args[0]
			err = checkID(h.ID)
		case "encodings":
			h.Encodings = lowerAll(args)
			err = checkEncodings(h.Encodings)
		case "max_size", "store_size", "delta_cache_size":
			if opt == "delta_cache_size" && args[0] == "off" {
				h.DeltaCacheSize = DeltaCacheOff
				continue
			}
			size, perr := humanize.ParseBytes(args[0])
			if perr != nil || size == 0 {
				return d.Errf("dictionary: %s %q: must be a size such as 4MiB", opt, args[0])
			}
			n := int64(min(size, math.MaxInt64))
			switch opt {
			case "max_size":
				h.MaxSize, err = n, checkMaxSize(n)
			case "store_size":
				// Checked against max_size and the encodings by Validate,
				// once every option is read.
				h.StoreSize = n
			default:
				h.DeltaCacheSize, err = n, checkDeltaCacheSize(n)
			}
		case "encoder_write_idle":
			dur, perr := caddy.ParseDuration(args[0])
			if perr != nil {
				return d.Errf("dictionary: encoder_write_idle %q: must be a duration such as 10s", args[0])
			}
			h.EncoderWriteIdle = caddy.Duration(dur)
			err = checkEncoderWriteIdle(h.EncoderWriteIdle)
		case "encoder_min_rate":
			rate, perr := humanize.ParseBytes(args[0])
			if perr != nil || rate == 0 {
				return d.Errf("dictionary: encoder_min_rate %q: must be a size per second such as 4KiB", args[0])
			}
			h.EncoderMinRate = int64(min(rate, math.MaxInt64))
			err = checkEncoderMinRate(h.EncoderMinRate)
		case "zstd_level":
			h.ZstdLevel, err = parseZstdLevel(strings.ToLower(args[0]))
		case "dcb_quality", "dcb_window", "max_encoders":
			n, perr := strconv.Atoi(args[0])
			if perr != nil {
				return d.Errf("dictionary: %s %q: not a number", opt, args[0])
			}
			switch opt {
			case "dcb_quality":
				h.DCBQuality, err = n, checkDCBQuality(n)
			case "dcb_window":
				h.DCBWindow, err = n, checkDCBWindow(n)
			default:
				h.MaxEncoders, err = n, checkMaxEncoders(n)
			}
		}
		if err != nil {
			return d.Errf("dictionary: %v", err)
		}
	}
	return nil
}
