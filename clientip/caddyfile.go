package clientip

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-edgekit/edgekit/internal/suggest"
)

// subdirectives are the options of the directive's block.
var subdirectives = []string{"trusted_proxies", "trusted_proxies_unix", "hops", "recursive", "header", "forwarded", "secret", "untrusted", "strip", "sign", "verify"}

// The directive registers itself with its package, so building Caddy with this
// package alone gives it; its default order (first in the chain after tracing,
// so every later handler, log and matcher sees the resolved client address)
// spares users an `order` line.
func init() {
	httpcaddyfile.RegisterHandlerDirective("client_ip", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("client_ip", httpcaddyfile.After, "tracing")
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
//	client_ip [<matcher>] {
//	    trusted_proxies <cidr|ip|private_ranges> ...
//	    trusted_proxies <source module> [<args>...] [{ ... }]
//	    trusted_proxies_unix
//	    hops <n> | recursive
//	    header <name> ...
//	    forwarded
//	    secret <header> <value>
//	    untrusted allow|observe|reject [<status>]
//	    strip <header> ...
//	    sign {
//	        key <id> <secret>
//	        header <name>
//	    }
//	    verify {
//	        key <id> <secret>
//	        max_age <duration>
//	        header <name>
//	        replay_cache_size <entries>
//	    }
//	}
//
// trusted_proxies, strip and verify's key may be repeated; their lists add
// up. Every other subdirective may be given once. A trusted_proxies line whose first argument is the name of an
// http.ip_sources module (static, or a plugin such as cloudflare) rather
// than an address is that module's configuration, as in Caddy's own
// trusted_proxies server option; there can be one such line, and its ranges
// add to the listed ones.
// singleOptions may be given once in a client_ip block.
var singleOptions = []string{"trusted_proxies_unix", "recursive", "hops", "forwarded", "secret", "untrusted"}

func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	given := map[string]bool{}
	for d.NextBlock(0) {
		option := d.Val()
		if slices.Contains(singleOptions, option) {
			// A second line would silently replace the first (untrusted
			// reject, then untrusted allow, would switch refusal off).
			if given[option] {
				return d.Errf("client_ip: %s given twice: a second line would replace the first; keep one", option)
			}
			given[option] = true
		}
		switch option {
		case "trusted_proxies":
			if !d.NextArg() {
				return d.ArgErr()
			}
			if name := d.Val(); isSourceName(name) {
				if err := h.unmarshalRangeSource(d, name); err != nil {
					return err
				}
				continue
			}
			args := append([]string{d.Val()}, d.RemainingArgs()...)
			for i, arg := range args {
				if arg == "private_ranges" {
					h.TrustedProxies = append(h.TrustedProxies, caddyhttp.PrivateRangesCIDR()...)
					continue
				}
				if _, err := parseTrustedProxy(arg); err != nil {
					if i == 0 && !strings.ContainsAny(arg, "./:") {
						err = unknownTrustedProxy(arg, err) // meant as a module name?
					}
					return d.Err(err.Error())
				}
				h.TrustedProxies = append(h.TrustedProxies, arg)
			}
		case "trusted_proxies_unix":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.TrustedProxiesUnix = true
		case "recursive":
			if d.NextArg() {
				return d.ArgErr()
			}
			if h.Hops != nil {
				return d.Err("client_ip: hops and recursive are exclusive: give hops <n> for a fixed number of proxy layers, or recursive to skip every address in trusted_proxies")
			}
			h.Recursive = true
		case "hops":
			if h.Recursive {
				return d.Err("client_ip: hops and recursive are exclusive: give hops <n> for a fixed number of proxy layers, or recursive to skip every address in trusted_proxies")
			}
			var arg string
			if !d.AllArgs(&arg) {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(arg)
			if err != nil {
				return d.Errf("client_ip: hops %q: not a number (number of proxy layers in front of Caddy, 1..%d)", arg, maxHops)
			}
			if err := checkHops(n); err != nil {
				return d.Err(err.Error())
			}
			h.Hops = &n
		case "header":
			names := d.RemainingArgs()
			if len(names) == 0 {
				return d.ArgErr()
			}
			if h.Header != "" || h.Headers != nil {
				return d.Err("client_ip: header given twice: list the headers on one line, in the order they are read")
			}
			for _, name := range names {
				if err := validHeaderName("header", name); err != nil {
					return d.Err(err.Error())
				}
			}
			if len(names) == 1 {
				h.Header = names[0]
			} else {
				h.Headers = names
			}
		case "forwarded":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.Forwarded = true
		case "secret":
			var name, value string
			if !d.AllArgs(&name, &value) {
				return d.Errf("secret: want a header name and a value, e.g. secret X-Edge-Secret {env.EDGE_SECRET}")
			}
			if err := validHeaderName("secret", name); err != nil {
				return d.Err(err.Error())
			}
			h.Secret = &Secret{Header: name, Value: value}
		case "untrusted":
			args := d.RemainingArgs()
			if len(args) < 1 || len(args) > 2 {
				return d.ArgErr()
			}
			action, err := parseUntrusted(args[0])
			if err != nil {
				return d.Err(err.Error())
			}
			if len(args) == 2 {
				if action != UntrustedReject {
					return d.Errf("client_ip: untrusted %s takes no status; only reject does", action)
				}
				status, err := strconv.Atoi(args[1])
				if err != nil {
					return d.Errf("client_ip: untrusted reject %q: not a number (a 4xx or 5xx status)", args[1])
				}
				if err := checkRejectStatus(status); err != nil {
					return d.Err(err.Error())
				}
				h.RejectStatus = status
			}
			h.Untrusted = action
		case "strip":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			for _, name := range args {
				if err := validHeaderName("strip", name); err != nil {
					return d.Err(err.Error())
				}
			}
			h.Strip = append(h.Strip, args...)
		case "sign":
			if h.Sign != nil {
				return d.Err("client_ip: sign given twice: a handler signs with one key")
			}
			h.Sign = new(Sign)
			if err := unmarshalSign(d, h.Sign); err != nil {
				return err
			}
		case "verify":
			if h.Verify != nil {
				return d.Err("client_ip: verify given twice: list every key in one verify block")
			}
			h.Verify = new(Verify)
			if err := unmarshalVerify(d, h.Verify); err != nil {
				return err
			}
		default:
			return suggest.Unknown(d, d.Val(), "client_ip", "", subdirectives...)
		}
	}
	return nil
}

// unmarshalKey reads `key <id> <secret>`.
func unmarshalKey(d *caddyfile.Dispenser, role string) (AssertionKey, error) {
	var k AssertionKey
	if !d.AllArgs(&k.ID, &k.Secret) {
		return k, d.Errf("client_ip: %s key: want an id and a secret, e.g. key k1 {env.EDGE_KEY_K1}", role)
	}
	if err := checkKeyID(role, k.ID); err != nil {
		return k, d.Err(err.Error())
	}
	return k, nil
}

func unmarshalAssertionHeader(d *caddyfile.Dispenser, role string, header *string) error {
	if !d.AllArgs(header) {
		return d.ArgErr()
	}
	if err := validHeaderName(role+" header", *header); err != nil {
		return d.Err(err.Error())
	}
	return nil
}

func unmarshalSign(d *caddyfile.Dispenser, s *Sign) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "key":
			if s.Key != nil {
				return d.Err("client_ip: sign: a second key: a PoP signs with one key (the origin's verify lists several)")
			}
			k, err := unmarshalKey(d, "sign")
			if err != nil {
				return err
			}
			s.Key = &k
		case "header":
			if err := unmarshalAssertionHeader(d, "sign", &s.Header); err != nil {
				return err
			}
		default:
			return suggest.Unknown(d, d.Val(), "client_ip", "sign", "key", "header")
		}
	}
	return nil
}

func unmarshalVerify(d *caddyfile.Dispenser, v *Verify) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "key":
			k, err := unmarshalKey(d, "verify")
			if err != nil {
				return err
			}
			v.Keys = append(v.Keys, k)
			if err := checkKeyIDs(v.Keys); err != nil {
				return d.Err(err.Error())
			}
		case "max_age":
			var arg string
			if !d.AllArgs(&arg) {
				return d.ArgErr()
			}
			age, err := caddy.ParseDuration(arg)
			if err != nil {
				return d.Errf("client_ip: verify max_age %q: not a duration (e.g. 30s)", arg)
			}
			if err := checkMaxAge(age); err != nil {
				return d.Err(err.Error())
			}
			duration := caddy.Duration(age)
			v.MaxAge = &duration
		case "header":
			if err := unmarshalAssertionHeader(d, "verify", &v.Header); err != nil {
				return err
			}
		case "replay_cache_size":
			var arg string
			if !d.AllArgs(&arg) {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(arg)
			if err != nil {
				return d.Errf("client_ip: verify replay_cache_size %q: not a number (how many used assertions are remembered)", arg)
			}
			if err := checkReplayCacheSize(n); err != nil {
				return d.Err(err.Error())
			}
			v.ReplayCacheSize = n
		default:
			return suggest.Unknown(d, d.Val(), "client_ip", "verify", "key", "max_age", "header", "replay_cache_size")
		}
	}
	return nil
}

// sourceNamespace is Caddy's namespace of IP-range source modules.
const sourceNamespace = "http.ip_sources"

// isSourceName reports whether a trusted_proxies argument names an IP-range
// source module rather than an address. An address always wins, so no
// module name can change what an existing list means.
func isSourceName(arg string) bool {
	if arg == "private_ranges" {
		return false
	}
	if _, err := caddyhttp.CIDRExpressionToPrefix(arg); err == nil {
		return false
	}
	_, err := caddy.GetModule(sourceNamespace + "." + arg)
	return err == nil
}

// unmarshalRangeSource reads `trusted_proxies <module> ...` (the dispenser
// on the module name) into TrustedProxiesSourceRaw.
func (h *Handler) unmarshalRangeSource(d *caddyfile.Dispenser, name string) error {
	if h.TrustedProxiesSourceRaw != nil {
		return d.Errf("client_ip: trusted_proxies %s: a source is already set; one source per handler (list fixed ranges on another trusted_proxies line)", name)
	}
	unm, err := caddyfile.UnmarshalModule(d, sourceNamespace+"."+name)
	if err != nil {
		return err
	}
	if _, ok := unm.(caddyhttp.IPRangeSource); !ok {
		return d.Errf("client_ip: trusted_proxies %s: module %T is not an IP range source", name, unm)
	}
	h.TrustedProxiesSourceRaw = caddyconfig.JSONModuleObject(unm, "source", name, nil)
	return nil
}

// unknownTrustedProxy is the error for a trusted_proxies argument that is
// neither an address nor a source module.
func unknownTrustedProxy(arg string, parseErr error) error {
	return fmt.Errorf("%v; nor is %q an IP-range source module (%s: %s)", parseErr, arg, sourceNamespace, strings.Join(sourceModules(), ", "))
}
