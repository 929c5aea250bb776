package ratelimit

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-edgekit/edgekit/internal/suggest"
)

// The directive registers itself with its package, so building Caddy with this
// package alone gives it; its default order (before basic_auth, so password
// guessing is limited too) spares users an `order` line.
func init() {
	httpcaddyfile.RegisterHandlerDirective("throttle", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("throttle", httpcaddyfile.Before, "basic_auth")
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

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	throttle [<matcher>] {
//	    zone <name> {
//	        key <template>          # default {client_ip}
//	        rate <n>/<duration>     # e.g. 100/1m, 10/s; or:
//	        concurrent <n>          # requests in flight per key (memory store)
//	        burst <n>               # default n-1: a bucket of n; 0: strict spacing
//	        ipv4_prefix <bits>      # default 32
//	        ipv6_prefix <bits>      # default 64
//	        charge_on status <code>...  # charge only these responses
//	        on_empty_key client_ip|skip|deny  # default client_ip
//	    }
//	    store memory [<max_keys>]
//	    store redis {
//	        address <host:port>
//	        username <name>
//	        password <password>
//	        db <n>
//	        key_prefix <prefix>     # default throttle:
//	        timeout <duration>      # default 100ms
//	        on_error allow|deny     # default allow
//	        tls {                   # TLS; an empty block: system roots
//	            ca <file>
//	            cert <file>         # client certificate (mutual TLS),
//	            key <file>          # with its key
//	            server_name <name>  # default the address's host
//	            insecure_skip_verify
//	        }
//	    }
//	    mode enforce|observe        # default enforce
//	    status <code>               # default 429
//	    headers on|off              # default on
//	    log_rejections debug|info|warn|error|off  # default info
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "zone":
			z := &Zone{}
			if !d.Args(&z.Name) {
				return d.ArgErr()
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			if err := z.unmarshal(d); err != nil {
				return err
			}
			h.Zones = append(h.Zones, z)
			if err := checkZoneCount(len(h.Zones)); err != nil {
				return d.Err(err.Error())
			}
		case "store":
			if !d.NextArg() {
				return d.ArgErr()
			}
			typ, err := parseStoreType(d.Val())
			if err != nil {
				return d.Err(err.Error())
			}
			h.Store = &Store{Type: typ}
			switch typ {
			case StoreMemory:
				if d.NextArg() {
					n, err := strconv.Atoi(d.Val())
					if err != nil {
						return d.Errf("throttle: store memory %q: max_keys must be a whole number, at least 1", d.Val())
					}
					if err := checkMaxKeys(n); err != nil {
						return d.Err(err.Error())
					}
					h.Store.MaxKeys = n
				}
				if d.NextArg() {
					return d.ArgErr()
				}
			case StoreRedis:
				if d.NextArg() {
					return d.ArgErr()
				}
				h.Store.Redis = &RedisStore{}
				if err := h.Store.Redis.unmarshal(d); err != nil {
					return err
				}
			}
		case "mode":
			var s string
			if !d.Args(&s) || d.NextArg() {
				return d.ArgErr()
			}
			mode, err := parseMode(s)
			if err != nil {
				return d.Err(err.Error())
			}
			h.Mode = mode
		case "status":
			var s string
			if !d.Args(&s) || d.NextArg() {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(s)
			if err != nil {
				return d.Errf("throttle: status %q: must be a number such as 429", s)
			}
			if err := checkStatus(n); err != nil {
				return d.Err(err.Error())
			}
			h.Status = n
		case "log_rejections":
			var s string
			if !d.Args(&s) || d.NextArg() {
				return d.ArgErr()
			}
			level, err := parseLogLevel(s)
			if err != nil {
				return d.Err(err.Error())
			}
			h.LogRejections = level
		case "headers":
			var s string
			if !d.Args(&s) || d.NextArg() {
				return d.ArgErr()
			}
			switch s {
			case "on":
				h.Headers = new(bool)
				*h.Headers = true
			case "off":
				h.Headers = new(bool)
			default:
				return d.Errf("headers %q: must be on or off", s)
			}
		default:
			return suggest.Unknown(d, d.Val(), "throttle", "", "zone", "store", "mode", "status", "headers", "log_rejections")
		}
	}
	return nil
}

// zoneOptions are a zone block's subdirectives.
var zoneOptions = []string{"key", "rate", "burst", "concurrent", "on_empty_key", "ipv4_prefix", "ipv6_prefix", "charge_on"}

func (z *Zone) unmarshal(d *caddyfile.Dispenser) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if opt == "charge_on" {
			if err := z.unmarshalChargeOn(d); err != nil {
				return err
			}
			continue
		}
		if !slices.Contains(zoneOptions, opt) {
			// Before the argument count: "brust" alone gets its suggestion.
			return suggest.Unknown(d, opt, "throttle", fmt.Sprintf("zone %q", z.Name), zoneOptions...)
		}
		var val string
		if !d.Args(&val) || d.NextArg() {
			return d.ArgErr()
		}
		var err error
		switch opt {
		case "key":
			z.Key = val
			_, err = checkKey(z.Name, val)
		case "rate":
			z.Rate = val
			_, err = checkRate(z.Name, val)
		case "concurrent":
			if z.Concurrent, err = strconv.ParseInt(val, 10, 64); err != nil {
				return d.Errf("throttle: zone %q: concurrent %q: not a whole number (requests in flight per key, 1..%d)", z.Name, val, maxConcurrent)
			}
			if z.Concurrent == 0 { // in JSON, 0 is unset
				err = checkConcurrent(z)
			}
		case "on_empty_key":
			z.OnEmptyKey, err = parseOnEmptyKey(z.Name, val)
		case "burst":
			b, perr := strconv.ParseInt(val, 10, 64)
			if perr != nil {
				return d.Errf("throttle: zone %q: burst %q: not a whole number", z.Name, val)
			}
			z.Burst = &b
		case "ipv4_prefix":
			if z.IPv4Prefix, err = strconv.Atoi(val); err != nil {
				return d.Errf("throttle: zone %q: ipv4_prefix %q: not a number (1..32)", z.Name, val)
			}
			err = checkIPv4Prefix(z.Name, z.IPv4Prefix)
		case "ipv6_prefix":
			if z.IPv6Prefix, err = strconv.Atoi(val); err != nil {
				return d.Errf("throttle: zone %q: ipv6_prefix %q: not a number (1..128)", z.Name, val)
			}
			err = checkIPv6Prefix(z.Name, z.IPv6Prefix)
		default:
			return suggest.Unknown(d, opt, "throttle", fmt.Sprintf("zone %q", z.Name), zoneOptions...)
		}
		if err != nil {
			return d.Err(err.Error())
		}
	}
	if z.Concurrent != 0 {
		if err := checkConcurrent(z); err != nil {
			return d.Err(err.Error())
		}
		return nil
	}
	// The burst's bound depends on the rate, which may come after it.
	if r, err := parseRate(z.Rate); err == nil && z.Burst != nil {
		if err := checkBurst(z.Name, *z.Burst, r); err != nil {
			return d.Err(err.Error())
		}
	}
	return nil
}

// unmarshalChargeOn reads `charge_on status <code>...`.
func (z *Zone) unmarshalChargeOn(d *caddyfile.Dispenser) error {
	if z.ChargeOn != nil {
		return d.Errf("throttle: zone %q: charge_on given twice: list every status on one line", z.Name)
	}
	var what string
	if !d.Args(&what) {
		return d.ArgErr()
	}
	if what != "status" {
		return d.Errf("throttle: zone %q: charge_on %q: want charge_on status <code>...", z.Name, what)
	}
	c := &ChargeOn{}
	for d.NextArg() {
		n, err := strconv.Atoi(d.Val())
		if err != nil {
			return d.Errf("throttle: zone %q: charge_on status %q: must be a number such as 401", z.Name, d.Val())
		}
		c.Status = append(c.Status, n)
	}
	if err := checkChargeOn(z.Name, c.Status); err != nil {
		return d.Err(err.Error())
	}
	z.ChargeOn = c
	return nil
}

func (r *RedisStore) unmarshal(d *caddyfile.Dispenser) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if opt == "tls" {
			if d.NextArg() {
				return d.ArgErr()
			}
			if r.TLS != nil {
				return d.Err("throttle: store redis: tls given twice: merge the blocks")
			}
			r.TLS = &RedisTLS{}
			if err := r.TLS.unmarshal(d); err != nil {
				return err
			}
			continue
		}
		var val string
		if !d.Args(&val) || d.NextArg() {
			return d.ArgErr()
		}
		switch opt {
		case "address":
			r.Address = val
		case "username":
			r.Username = val
		case "password":
			r.Password = val
		case "db":
			n, err := strconv.Atoi(val)
			if err != nil {
				return d.Errf("throttle: store redis: db %q: must be a database number, 0 or more", val)
			}
			if err := checkDB(n); err != nil {
				return d.Err(err.Error())
			}
			r.DB = n
		case "key_prefix":
			// Placeholders ({env.NAME}) expand when the config loads and
			// are checked then; a literal brace (\{) is refused here.
			if err := checkKeyPrefix(caddy.NewEmptyReplacer().ReplaceAll(val, "")); err != nil {
				return d.Err(err.Error())
			}
			r.KeyPrefix = val
		case "timeout":
			t, err := caddy.ParseDuration(val)
			if err != nil {
				return d.Errf("throttle: store redis: timeout %q: must be a positive duration such as 100ms", val)
			}
			if err := checkTimeout(t); err != nil {
				return d.Err(err.Error())
			}
			r.Timeout = caddy.Duration(t)
		case "on_error":
			action, err := parseOnError(val)
			if err != nil {
				return d.Err(err.Error())
			}
			r.OnError = action
		default:
			return suggest.Unknown(d, opt, "throttle", "store redis", "address", "username", "password", "db", "key_prefix", "timeout", "on_error", "tls")
		}
	}
	return nil
}
