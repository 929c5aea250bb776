package earlyhints

import (
	"errors"
	"slices"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-edgekit/edgekit/internal/enum"
	"github.com/caddy-edgekit/edgekit/internal/suggest"
)

// The directive registers itself with its package. Its default order is
// after forward_auth, so after client_ip (after tracing), throttle (before
// basic_auth), basic_auth and forward_auth: a request one of them refuses
// (client_ip's reject, throttle's 429, a 401) has been answered before
// early_hints runs, and gets no 103 it would have to take back.
func init() {
	httpcaddyfile.RegisterHandlerDirective("early_hints", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("early_hints", httpcaddyfile.After, "forward_auth")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	if err := m.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return m, nil
}

var subdirectives = []string{"allow_origin", "link", "hint_on", "http1", "max_paths", "max_bytes", "max_age", "learn"}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	early_hints [<matcher>] {
//	    allow_origin <origin>...          # e.g. https://cdn.example.com
//	    link <url> <rel> [<as>]           # e.g. /app.css preload style
//	    hint_on navigate|any
//	    http1 on|off
//	    max_paths <n>
//	    max_bytes <n>
//	    max_age <duration>
//	    learn on|off
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := map[string]bool{}
	for d.NextBlock(0) {
		opt := d.Val()
		if !slices.Contains(subdirectives, opt) {
			return suggest.Unknown(d, opt, "early_hints", "", subdirectives...)
		}
		// Every option but allow_origin and link holds one value: a
		// second line would silently replace the first.
		if opt != "allow_origin" && opt != "link" {
			if seen[opt] {
				return d.Errf("early_hints: %s given twice: a second line would replace the first; keep one", opt)
			}
			seen[opt] = true
		}
		args := d.RemainingArgs()
		one := func() (string, error) {
			if len(args) != 1 {
				return "", d.Errf("early_hints: %s: want one value", opt)
			}
			return args[0], nil
		}
		switch opt {
		case "allow_origin":
			if len(args) == 0 {
				return d.Errf("early_hints: allow_origin: want one or more origins such as https://cdn.example.com")
			}
			for _, o := range args {
				if err := checkOrigin(o); err != nil {
					return d.Errf("early_hints: allow_origin: %v", err)
				}
			}
			h.AllowOrigin = append(h.AllowOrigin, args...)
		case "link":
			if len(args) < 2 || len(args) > 3 {
				return d.Errf("early_hints: link: want <url> <rel> [<as>], e.g. link /app.css preload style")
			}
			l := Link{URL: args[0], Rel: args[1]}
			if len(args) == 3 {
				l.As = args[2]
			}
			if _, err := l.value(); err != nil {
				return d.Errf("early_hints: link: %v", err)
			}
			if len(h.Links) == maxManualLinks {
				return d.Errf("early_hints: link %s: more than %d links (a 103 holds at most %d): keep those the page needs first", l.URL, maxManualLinks, maxPathLinks)
			}
			h.Links = append(h.Links, l)
		case "hint_on":
			v, err := one()
			if err != nil {
				return err
			}
			if h.HintOn, err = parseHintOn(v); err != nil {
				return d.Errf("early_hints: hint_on: %v", err)
			}
		case "http1", "learn":
			v, err := one()
			if err != nil {
				return err
			}
			on := v == "on"
			if !on && v != "off" {
				return d.Errf("early_hints: %s: %q: must be on or off", opt, v)
			}
			if opt == "http1" {
				h.HTTP1 = on
			} else {
				h.Learn = &on
			}
		case "max_paths", "max_bytes":
			v, err := one()
			if err != nil {
				return err
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if errors.Is(err, strconv.ErrRange) && v[0] != '-' {
				bound := int64(maxMaxPaths)
				if opt == "max_bytes" {
					bound = maxMaxBytes
				}
				return d.Errf("early_hints: %s %s: above the maximum, %d", opt, v, bound)
			}
			if err != nil || n <= 0 {
				return d.Errf("early_hints: %s: %q: want a positive integer", opt, v)
			}
			if opt == "max_paths" {
				err = checkBounds(n, 0)
				h.MaxPaths = int(min(n, maxMaxPaths+1))
			} else {
				err = checkBounds(0, n)
				h.MaxBytes = n
			}
			if err != nil {
				return d.Errf("early_hints: %v", err)
			}
		case "max_age":
			v, err := one()
			if err != nil {
				return err
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("early_hints: max_age: %q: want a positive duration such as 1h", v)
			}
			h.MaxAge = caddy.Duration(dur)
		}
	}
	// After the block: an allow_origin may follow the link it allows.
	if err := h.checkLinkOrigins(); err != nil {
		return d.Err(err.Error())
	}
	return nil
}

func parseHintOn(s string) (HintOn, error) { return enum.Parse(s, HintNavigate, HintAny) }

var _ caddyfile.Unmarshaler = (*Handler)(nil)
