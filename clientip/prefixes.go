package clientip

import (
	"net/netip"
	"slices"
)

// unmapPrefix turns an IPv4-mapped IPv6 prefix (::ffff:10.0.0.0/104) into
// its IPv4 form, since addresses are unmapped before comparison.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked()
	}
	return p.Masked()
}

// coversEverything reports whether the prefixes together cover the whole
// IPv4 or the whole IPv6 space (0.0.0.0/0, or 0.0.0.0/1 with 128.0.0.0/1...).
func coversEverything(prefixes []netip.Prefix) (string, bool) {
	for _, is4 := range []bool{true, false} {
		var family []netip.Prefix
		for _, p := range prefixes {
			if p.Addr().Is4() == is4 {
				family = append(family, p)
			}
		}
		slices.SortFunc(family, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
		// Sweep: next is the lowest address not yet covered.
		next := netip.IPv4Unspecified()
		name := "IPv4"
		if !is4 {
			next, name = netip.IPv6Unspecified(), "IPv6"
		}
		for _, p := range family {
			if p.Addr().Compare(next) > 0 {
				break
			}
			last := lastAddr(p)
			if last.Compare(next) >= 0 {
				next = last.Next()
				if !next.IsValid() { // wrapped past the top of the space
					return name, true
				}
			}
		}
	}
	return "", false
}

// lastAddr returns the highest address in the (masked) prefix p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().As16()
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	for i := bits; i < 128; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	addr := netip.AddrFrom16(b)
	if p.Addr().Is4() {
		return addr.Unmap()
	}
	return addr
}
