package servertiming

import (
	"errors"
	"fmt"
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
	for _, o := range origins {
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
	return nil
}
