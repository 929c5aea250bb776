package substitute

import (
	"cmp"
	"math"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/caddy-edgekit/edgekit/internal/suggest"
	"github.com/caddy-edgekit/edgekit/substitute/internal/engine"
)

// The directive registers itself with its package, so building Caddy with this
// package alone gives it; its default order (after encode, so it rewrites the
// body before encode compresses it) spares users an `order` line.
func init() {
	httpcaddyfile.RegisterHandlerDirective("substitute", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("substitute", httpcaddyfile.After, "encode")
}

// parseCaddyfile adapts UnmarshalCaddyfile to the directive; the matcher
// token is consumed by RegisterHandlerDirective before this runs.
func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	if err := m.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return m, nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	substitute [<matcher>] {
//	    replace <find> <replacement> [once]    # literal text; $ is written as is
//	    regex <pattern> <replacement> [once]   # RE2; $1, ${name}, $$ as regexp.Expand
//	    types <media-type> ...                 # default: DefaultTypes
//	    status <code|2xx> ...                  # default: every status with a body
//	    priority longest|first                 # default longest
//	    max_match <size>                       # default 16KiB
//	    memo <entries>|off                     # default 10000
//	    headers <field> ...                    # also rewrite these response fields
//	}
//
// Rules keep their declaration order, which breaks ties.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	var ruleTokens []caddyfile.Token // where each rule is, for errors found later
	for d.NextBlock(0) {
		switch opt := d.Val(); opt {
		case "replace", "regex":
			args := d.RemainingArgs()
			rule := len(h.Rules) + 1
			if len(args) < 2 || len(args) > 3 {
				return d.Errf("rule %d: %s: expected <find> <replacement> [once], got %d arguments", rule, opt, len(args))
			}
			if len(args) == 3 && args[2] != "once" {
				return d.Errf("rule %d: %s %q: unknown option %q (only once is allowed)", rule, opt, args[0], args[2])
			}
			r := Rule{Find: args[0], Regex: opt == "regex", Replace: args[1], Once: len(args) == 3}
			ruleTokens = append(ruleTokens, d.Token())
			// Compiled here too, so that `caddy adapt` points at the line.
			if err := compileRule(rule-1, r); err != nil {
				return d.Err(err.Error())
			}
			if len(h.Headers) > 0 {
				if err := checkHeaderRule(rule-1, r); err != nil {
					return d.Err(err.Error())
				}
			}
			h.Rules = append(h.Rules, r)
		case "headers":
			args := d.RemainingArgs()
			if opensBlock(d) {
				return d.Err("substitute: headers takes field names on its line, not a block: write headers Location Set-Cookie ...")
			}
			if len(args) == 0 {
				return d.Errf("substitute: headers: expected the response field names to rewrite, such as headers Location Set-Cookie")
			}
			h.Headers = append(h.Headers, args...)
			if err := checkHeaderNames(h.Headers); err != nil {
				return d.Err(err.Error())
			}
			for i, r := range h.Rules { // the rules above, at their own line; those below are checked there
				if err := checkHeaderRule(i, r); err != nil {
					at := caddyfile.NewDispenser([]caddyfile.Token{ruleTokens[i]})
					at.Next()
					return at.Err(err.Error())
				}
			}
		case "types":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			for _, t := range args {
				if err := checkType(t); err != nil {
					return d.Err(err.Error())
				}
			}
			h.Types = append(h.Types, args...)
		case "status":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			for _, a := range args {
				code, err := parseStatus(a)
				if err != nil {
					return d.Err(err.Error())
				}
				h.Status = append(h.Status, code)
			}
		case "priority":
			if !d.NextArg() {
				return d.ArgErr()
			}
			priority, err := parsePriority(d.Val())
			if err != nil {
				return d.Err(err.Error())
			}
			h.Priority = priority
			if d.NextArg() {
				return d.ArgErr()
			}
		case "max_match":
			if !d.NextArg() {
				return d.ArgErr()
			}
			size, err := humanize.ParseBytes(d.Val())
			if err != nil {
				return d.Errf("substitute: max_match %q: must be a size from 64B to 16MiB, such as 16KiB (leave it out for the default 16KiB)", d.Val())
			}
			n := int(min(size, math.MaxInt32)) // beyond the bound either way
			if err := checkMaxMatch(n); err != nil {
				return d.Err(err.Error())
			}
			h.MaxMatch = n
			if d.NextArg() {
				return d.ArgErr()
			}
		case "memo":
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := parseMemo(d.Val())
			if err != nil {
				return d.Err(err.Error())
			}
			h.Memo = n
			if d.NextArg() {
				return d.ArgErr()
			}
		default:
			return suggest.Unknown(d, opt, "substitute", "", "replace", "regex", "types", "status", "priority", "max_match", "memo", "headers")
		}
	}
	if err := checkRuleCount(len(h.Rules)); err != nil {
		return d.Err(err.Error())
	}
	// max_match may follow the rules it bounds.
	maxMatch := cmp.Or(h.MaxMatch, engine.DefaultMaxMatch)
	for i, r := range h.Rules {
		if err := checkRule(i, r, maxMatch); err != nil {
			return d.Err(err.Error())
		}
	}
	return nil
}

// opensBlock reports whether the next token opens a block on the current
// line, leaving the cursor where it was.
func opensBlock(d *caddyfile.Dispenser) bool {
	line := d.Line()
	if !d.Next() {
		return false
	}
	open := d.Val() == "{" && d.Line() == line
	d.Prev()
	return open
}
