package clientip

import (
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Caddy's IP-range sources (modules in the http.ip_sources namespace, the
// interface caddyhttp.IPRangeSource) in trusted_proxies_source: the
// standard `static` and plugins that fetch a CDN's published ranges and
// refresh them in the background. A source is asked on every request that
// gets as far as checking addresses, so its ranges change without a reload.
//
// `static` says at load time everything it will ever say, so its ranges join
// the fixed list: the same fast path and the same refuse-to-start checks. Any
// other source can only be judged per request: what it returns is never
// believed if it covers every address (see rangeGuard).

// loadRangeSource loads the handler's trusted_proxies_source and either
// folds a static one into rs.trusted or keeps it as rs.ranges.
func (h *Handler) loadRangeSource(ctx caddy.Context) error {
	mod, err := ctx.LoadModule(h, "TrustedProxiesSourceRaw")
	if err != nil {
		return fmt.Errorf("client_ip: trusted_proxies_source: %w", err)
	}
	src, ok := mod.(caddyhttp.IPRangeSource)
	if !ok {
		return fmt.Errorf("client_ip: trusted_proxies_source: module %T is not an IP range source (caddyhttp.IPRangeSource)", mod)
	}
	h.sourceName = string(mod.(caddy.Module).CaddyModule().ID)
	rs := &h.resolver
	if static, ok := src.(*caddyhttp.StaticIPRange); ok {
		// A static source ignores the request; its ranges were parsed by
		// its Provision.
		ranges := static.GetIPRanges(nil)
		if len(ranges) == 0 {
			return fmt.Errorf("client_ip: trusted_proxies_source static has no ranges: list the edge's addresses")
		}
		if rs.trusted == nil {
			rs.trusted = []netip.Prefix{}
		}
		for _, p := range ranges {
			rs.trusted = append(rs.trusted, unmapPrefix(p))
		}
		return nil
	}
	rs.ranges = src
	rs.guard = new(rangeGuard)
	return nil
}

// inSourcePrefixes is inPrefixes for a source's answer, whose prefixes may
// be IPv4-mapped IPv6 (Caddy's static source keeps them as written) while
// addresses here are unmapped. It does not allocate.
func inSourcePrefixes(prefixes []netip.Prefix, addr netip.Addr) bool {
	for _, p := range prefixes {
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				continue // wider than the mapped block: covers no unmapped IPv4 address as such
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// rangeGuard judges a dynamic source's answers: one that covers every IPv4
// or every IPv6 address (0.0.0.0/0, ::/0, ::ffff:0:0/96, or a union such as
// 0.0.0.0/1 with 128.0.0.0/1) is a broken source or a poisoned feed, not an
// edge, and the request is then judged not to have come through the edge.
//
// A single prefix covering everything is looked for on every request (a
// loop over what the matching reads anyway). A union is found by a sort and
// a sweep, which allocate, so its verdict is kept with a copy of the answer
// it was made for, and reused while the source's answer has the same
// contents: sources hand out the same ranges until they refresh, so the
// sweep runs once per refresh, and a request costs a comparison and no
// allocation. The verdict is keyed by content, never by the slice's
// address: a source that rewrites its slice in place (same array, same
// length, new ranges) must not inherit the old verdict.
type rangeGuard struct {
	last atomic.Pointer[rangeVerdict]
	logThrottle
}

type rangeVerdict struct {
	ranges []netip.Prefix // a copy of the answer the verdict is for
	family string         // "" when it does not cover every address
}

// coversEverything returns the family ("IPv4", "IPv6") whose every address
// the source's answer covers, or "".
func (g *rangeGuard) coversEverything(ranges []netip.Prefix) string {
	if len(ranges) == 0 {
		return ""
	}
	for _, p := range ranges {
		if p.Bits() == 0 || p.Addr().Is4In6() && p.Bits() <= 96 {
			if p.Addr().Is4() {
				return "IPv4"
			}
			if p.Bits() == 0 {
				return "IPv6"
			}
			return "IPv4" // ::ffff:0:0/96 and wider mapped blocks hold all of IPv4
		}
	}
	if v := g.last.Load(); v != nil && slices.Equal(v.ranges, ranges) {
		return v.family
	}
	kept := slices.Clone(ranges)
	unmapped := make([]netip.Prefix, len(kept))
	for i, p := range kept {
		unmapped[i] = unmapPrefix(p)
	}
	family, _ := coversEverything(unmapped)
	g.last.Store(&rangeVerdict{ranges: kept, family: family})
	return family
}

// sourceModules lists the registered http.ip_sources module names, for
// error messages.
func sourceModules() []string {
	var names []string
	for _, info := range caddy.GetModules(sourceNamespace) {
		names = append(names, info.ID.Name())
	}
	slices.Sort(names)
	return names
}
