package servertiming

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The entry names, fixed: edgebench and RUM scripts read them.
const (
	nameEdge       = "edge"
	nameOrigin     = "origin"
	nameOriginConn = "origin-conn"
	nameOriginDial = "origin-dial"
	nameOriginTLS  = "origin-tls"
	nameClient     = "client"
	nameRTT        = "rtt"
	nameThrottle   = "throttle"
	nameSubstitute = "substitute"
	nameTotal      = "total"
)

// maxHeaderLen is the capacity the entries are built in: every entry at
// once, each duration at its largest, fits.
const maxHeaderLen = 320

// appendDur appends `name;dur=<ms>`, the duration in milliseconds with
// microsecond precision (a negative one, which a clock cannot give between
// two monotonic readings, as 0), after a separator when b is not empty.
func appendDur(b []byte, name string, d time.Duration) []byte {
	b = appendName(b, name)
	b = append(b, ";dur="...)
	d = max(d, 0)
	// Whole milliseconds and microseconds as integers: AppendFloat would
	// print 1e+06 style for large values and cost more.
	us := int64(d / time.Microsecond)
	b = strconv.AppendInt(b, us/1000, 10)
	b = append(b, '.')
	frac := us % 1000
	if frac < 100 {
		b = append(b, '0')
	}
	if frac < 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, frac, 10)
}

// appendDesc appends `name;desc=<desc>`; desc is one of this package's
// constants (a token, or a quoted-string with its quotes), never a value
// from a request or an upstream.
func appendDesc(b []byte, name, desc string) []byte {
	b = appendName(b, name)
	b = append(b, ";desc="...)
	return append(b, desc...)
}

func appendName(b []byte, name string) []byte {
	if len(b) > 0 {
		b = append(b, ", "...)
	}
	return append(b, name...)
}

// checkTimingAllowOrigin accepts "*" alone, or serialized origins
// (scheme://host[:port], lowercase, nothing else), so that a configured
// value can never add a field, a parameter or another header.
func checkTimingAllowOrigin(origins []string) error {
	for i, o := range origins {
		for _, prev := range origins[:i] {
			if prev == o {
				return fmt.Errorf("%q given twice: give each origin once", o)
			}
		}
		if o == "*" {
			if len(origins) > 1 {
				return errors.New(`"*" allows every origin: give it alone`)
			}
			continue
		}
		if err := checkOrigin(o); err != nil {
			return err
		}
	}
	return nil
}

// checkOrigin accepts a serialized origin (RFC 6454 §6.2) of an http or
// https page: what a browser compares Timing-Allow-Origin with.
func checkOrigin(o string) error {
	for i := 0; i < len(o); i++ {
		if c := o[i]; c <= ' ' || c >= 0x7f || c == ',' || c == ';' || c == '"' || c == '\\' {
			return fmt.Errorf("%q: not an origin: byte %q at %d (want scheme://host[:port], e.g. https://app.example.com)", o, c, i)
		}
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		u.Scheme+"://"+u.Host != o || strings.ToLower(o) != o {
		return fmt.Errorf("%q: not an origin: want lowercase scheme://host[:port] with scheme http or https and no path, e.g. https://app.example.com", o)
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return fmt.Errorf("%q: not an origin: port %q must be 1-65535", o, port)
		}
	}
	if u.Hostname() == "" || strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("%q: not an origin: no host", o)
	}
	// A browser compares the page's serialized origin byte for byte: a
	// value it never serializes matches no page.
	if port := u.Port(); (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		return fmt.Errorf("%q: no browser sends the default port: write %s://%s, without :%s", o, u.Scheme, strings.TrimSuffix(u.Host, ":"+port), port)
	}
	return checkOriginHost(o, u.Scheme, u.Hostname(), strings.HasPrefix(u.Host, "["))
}

// checkOriginHost accepts a host as a browser serializes it: a domain of
// LDH labels (lowercase, 1-63 bytes, no hyphen at either end, 253 at
// most), a dotted-decimal IPv4 address, or a compressed IPv6 address in
// brackets that is not IPv4-mapped.
func checkOriginHost(o, scheme, host string, bracketed bool) error {
	if bracketed {
		a, err := netip.ParseAddr(host)
		switch {
		case err != nil || !a.Is6() || a.Zone() != "":
			return fmt.Errorf("%q: not an origin: %q is not an IPv6 address", o, host)
		case a.Is4In6():
			return fmt.Errorf("%q: browsers serialize an IPv4-mapped address otherwise: write %s://%s, the IPv4 address", o, scheme, a.Unmap())
		case a.String() != host:
			return fmt.Errorf("%q: browsers serialize this IPv6 address compressed: write %s://[%s]", o, scheme, a)
		}
		return nil
	}
	if strings.Contains(host, "*") {
		return fmt.Errorf("%q: Timing-Allow-Origin has no wildcards: name each origin, or give \"*\" alone for every page", o)
	}
	labels := strings.Split(host, ".")
	if last := labels[len(labels)-1]; last != "" && (strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x")) {
		// A host ending in a number is an IPv4 address to a browser,
		// which serializes it in dotted decimal.
		if a, err := netip.ParseAddr(host); err != nil || !a.Is4() {
			return fmt.Errorf("%q: browsers read this host as an IPv4 address and serialize it in dotted decimal: write it so, e.g. %s://127.0.0.1", o, scheme)
		}
		return nil
	}
	if len(host) > 253 {
		return fmt.Errorf("%q: host longer than 253 bytes", o)
	}
	for _, l := range labels {
		switch {
		case l == "":
			return fmt.Errorf("%q: empty label in the host (a leading, trailing or doubled dot): write the host without it", o)
		case len(l) > 63:
			return fmt.Errorf("%q: label %.16q... longer than 63 bytes", o, l)
		case l[0] == '-' || l[len(l)-1] == '-':
			return fmt.Errorf("%q: label %q begins or ends with a hyphen", o, l)
		case strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "":
			return fmt.Errorf("%q: label %q has a byte other than a-z, 0-9, - and _ (write an internationalized name in its xn-- form)", o, l)
		}
	}
	return nil
}
