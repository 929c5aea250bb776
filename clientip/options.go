package clientip

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"golang.org/x/net/http/httpguts"

	"github.com/caddy-edgekit/edgekit/internal/enum"
)

// Each bound and enumeration is checked by one function here, called by both
// the Caddyfile parser (so `caddy adapt` points at the offending line) and
// Validate (for JSON configs), so the two can never disagree.

// Untrusted is what the handler does with a request that did not verifiably
// come through the edge. In JSON it is the plain string.
type Untrusted string

// Untrusted actions.
const (
	UntrustedAllow   Untrusted = "allow"
	UntrustedObserve Untrusted = "observe"
	UntrustedReject  Untrusted = "reject"
)

// parseUntrusted returns the action named s, or an error listing the valid ones.
func parseUntrusted(s string) (Untrusted, error) {
	v, err := enum.Parse(s, UntrustedAllow, UntrustedObserve, UntrustedReject)
	if err != nil {
		return "", fmt.Errorf("client_ip: untrusted %w", err)
	}
	return v, nil
}

func checkHops(n int) error {
	if n < 1 || n > maxHops {
		return fmt.Errorf("client_ip: hops %d: must be 1..%d (number of proxy layers in front of Caddy)", n, maxHops)
	}
	return nil
}

// checkRejectStatus refuses a status that would not tell the caller it was
// refused (2xx, 3xx) or that HTTP does not have.
func checkRejectStatus(status int) error {
	if status < 400 || status > 599 {
		return fmt.Errorf("client_ip: untrusted reject %d: status must be 4xx or 5xx", status)
	}
	return nil
}

// parseTrustedProxy reads one trusted_proxies entry other than private_ranges.
func parseTrustedProxy(expr string) (netip.Prefix, error) {
	p, err := caddyhttp.CIDRExpressionToPrefix(expr)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("client_ip: trusted_proxies: %v: give a CIDR (10.0.0.0/8), an IP or private_ranges", err)
	}
	return p, nil
}

func validHeaderName(option, name string) error {
	if !httpguts.ValidHeaderFieldName(name) {
		return fmt.Errorf("client_ip: %s %q: not a valid header name", option, name)
	}
	return nil
}

// checkKeyID refuses an id that could not be written in an assertion.
func checkKeyID(role, id string) error {
	if !validKeyID(id) {
		return fmt.Errorf("client_ip: %s key %q: the id must be 1..%d characters of A-Z a-z 0-9 . _ - (e.g. k2, or 2026-12)", role, id, maxKeyIDLen)
	}
	return nil
}

// checkKeyIDs refuses a second key with an id already given: which one an
// assertion names would be a guess.
func checkKeyIDs(keys []AssertionKey) error {
	for i, k := range keys {
		if err := checkKeyID("verify", k.ID); err != nil {
			return err
		}
		for _, earlier := range keys[:i] {
			if earlier.ID == k.ID {
				return fmt.Errorf("client_ip: verify key %s: given twice: each key needs an id of its own", k.ID)
			}
		}
	}
	return nil
}

// checkKeyLength refuses keys shorter than HMAC-SHA256's output.
func checkKeyLength(role, id string, n int) error {
	if n < minKeyBytes {
		return fmt.Errorf("client_ip: %s key %s: %d bytes, want at least %d: generate one with `openssl rand -base64 48`", role, id, n, minKeyBytes)
	}
	return nil
}

// checkMaxAge bounds how long a captured assertion stays usable.
func checkMaxAge(d time.Duration) error {
	if d < minMaxAge || d > maxMaxAge {
		return fmt.Errorf("client_ip: verify max_age %s: must be %s..%s (how long after signing an assertion is accepted)", d, minMaxAge, maxMaxAge)
	}
	return nil
}

// checkReplayCacheSize bounds the origin's record of used assertions: big
// enough for real traffic, small enough to be memory the operator chose.
func checkReplayCacheSize(n int) error {
	if n < minReplayCacheSize || n > maxReplayCacheSize {
		return fmt.Errorf("client_ip: verify replay_cache_size %d: must be %d..%d (how many used assertions are remembered until they expire: give at least the signed requests per second times 1.2 x max_age + 5s)", n, minReplayCacheSize, maxReplayCacheSize)
	}
	return nil
}

// validateDepth checks how far into the chain the edge reaches: hops or
// recursive, never both, and nothing that could never be believed.
func (h *Handler) validateDepth() error {
	ranges := h.TrustedProxies != nil || h.sourceName != ""
	if h.Recursive {
		if h.Hops != nil {
			return errors.New("client_ip: hops and recursive are exclusive: give hops <n> for a fixed number of proxy layers, or recursive to skip every address in trusted_proxies")
		}
		if !ranges {
			return errors.New("client_ip: recursive skips the addresses in trusted_proxies, and none are listed: list the edge's ranges in trusted_proxies (or a source), or use hops")
		}
		if len(h.headerList()) > 0 {
			return errors.New("client_ip: recursive reads the client from the chain, header from a single-value header: remove recursive and give hops (the peer plus the proxies between the edge that writes the header and Caddy)")
		}
		return nil
	}
	if err := checkHops(*h.Hops); err != nil {
		return err
	}
	if *h.Hops > 1 && h.TrustedProxiesUnix && !ranges {
		return fmt.Errorf("client_ip: hops %d with trusted_proxies_unix alone: the proxies beyond the socket have addresses: list them in trusted_proxies", *h.Hops)
	}
	return nil
}

// validateHeaders checks header or headers: single-value headers, in
// order, each once; X-Forwarded-For only last, as the fallback to the list.
func (h *Handler) validateHeaders() error {
	if h.Header != "" && len(h.Headers) > 0 {
		return errors.New("client_ip: header and headers are exclusive: list every header in headers, in order")
	}
	list := h.headerList()
	if len(list) > 0 && h.Forwarded {
		return errors.New("client_ip: header and forwarded are exclusive: read either a single-value header or the Forwarded field")
	}
	for i, name := range list {
		if err := validHeaderName("header", name); err != nil {
			return err
		}
		canon := http.CanonicalHeaderKey(name)
		switch {
		case canon == "Forwarded", canon == "X-Forwarded-For" && len(list) == 1:
			return fmt.Errorf("client_ip: header %s is a list, not a single value: omit header for X-Forwarded-For, or use forwarded", name)
		case canon == "X-Forwarded-For" && i != len(list)-1:
			return fmt.Errorf("client_ip: header %s: X-Forwarded-For must come last, as the fallback when none of the others is present (behind an edge it is always there, so a header after it would never be read)", strings.Join(list, " "))
		}
		for _, earlier := range list[:i] {
			if http.CanonicalHeaderKey(earlier) == canon {
				return fmt.Errorf("client_ip: header %s: %s is given twice", strings.Join(list, " "), name)
			}
		}
	}
	return nil
}
