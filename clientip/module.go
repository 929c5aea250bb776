// Package clientip implements the client_ip handler: it decides whether a
// request really came through the operator's own edge (PoP, load balancer)
// and, only then, believes the caller address the edge wrote in
// X-Forwarded-For, an RFC 7239 Forwarded field or a single-value header.
// Everything else gets the TCP peer, so no caller can choose its own address.
package clientip

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// defaultStrip are the headers a caller could use to claim an address, which
// origin frameworks read (chi's RealIP checks True-Client-IP first, Rack and
// PHP apps Client-IP and X-Cluster-Client-IP, Rails X-Forwarded and
// Forwarded-For, CloudFront and Envoy their own). CDNs relay them as the caller
// wrote them, so they are removed on every path, except the one this
// handler reads and rewrites.
var defaultStrip = []string{"X-Real-IP", "True-Client-IP", "CF-Connecting-IP", "Fastly-Client-IP",
	"X-Client-IP", "X-Cluster-Client-IP", "Client-IP", "Forwarded",
	"CloudFront-Viewer-Address", "X-Envoy-External-Address", "X-Originating-IP", "X-Remote-IP",
	"X-Remote-Addr", "X-ProxyUser-Ip", "X-Forwarded", "Forwarded-For", "X-Original-Forwarded-For"}

// The forwarding chain reverse_proxy reads and extends. Not through the
// edge, all of it is the caller's: it is removed so that reverse_proxy
// starts afresh from the peer even where its own trusted_proxies (or
// Caddy's) would have it keep the caller's list. Through the edge,
// X-Forwarded-For is rewritten to start at the client and Forwarded is
// trimmed likewise in Forwarded mode (removed otherwise); X-Forwarded-Proto
// and X-Forwarded-Host are the edge's.
var untrustedChain = []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded"}

// Handler resolves the real client address of requests that came through a
// trusted edge, sets Caddy's `client_ip` and `trusted_proxy` variables from
// it, and strips client-address headers from requests that did not.
//
// Through the edge, X-Forwarded-For is trimmed to start at the client (in
// header and Forwarded modes it becomes just the client), so reverse_proxy,
// which appends the peer, sends upstream only what the edge vouched for.
// Otherwise reverse_proxy starts it afresh, since trusted_proxy is false.
type Handler struct {
	// Addresses of the edge in front of Caddy: CIDRs, single IPs, or
	// `private_ranges`. The last `hops` members of the chain (the TCP peer
	// first) must all be in here.
	TrustedProxies []string `json:"trusted_proxies,omitempty"`

	// A Caddy IP-range source (module namespace http.ip_sources, named by
	// its "source" key), as in Caddy's own server option: `static` with
	// its "ranges", or a plugin that fetches and refreshes a CDN's
	// published ranges. It adds to trusted_proxies: a member of the span
	// is trusted when it is in either. A dynamic source is asked on every
	// request, so its ranges change without a reload; when what it returns
	// covers every IPv4 or IPv6 address, requests are judged not to have
	// come through the edge (reason source_covers_everything), and logged
	// at most once a minute. `static` ranges are known at load time and
	// are checked like trusted_proxies.
	TrustedProxiesSourceRaw json.RawMessage `json:"trusted_proxies_source,omitempty" caddy:"namespace=http.ip_sources inline_key=source"`

	// Number of trusted proxy layers in front of Caddy, 1..16. Default 1
	// (unless recursive).
	Hops *int `json:"hops,omitempty"`

	// Instead of a fixed number of hops: read the chain from the right,
	// skipping every address in trusted_proxies (or its source); the
	// first address outside is the client (as nginx's real_ip_recursive,
	// Caddy's trusted_proxies_strict). Up to 16 trusted proxies, the peer
	// included; an invalid entry before the client, a chain with no
	// address outside the ranges or with more trusted proxies than that
	// is not believed. Excludes hops and header; needs trusted_proxies.
	Recursive bool `json:"recursive,omitempty"`

	// A single-value header the edge writes with the true caller (e.g.
	// CF-Connecting-IP). Default: the X-Forwarded-For list.
	Header string `json:"header,omitempty"`

	// An ordered list of such headers, instead of header: the first one
	// present is read, and a later one only when every earlier one is
	// absent (never when one is present but invalid: that is the peer).
	// The last may be X-Forwarded-For: with none of the others present,
	// the chain is read as without header.
	Headers []string `json:"headers,omitempty"`

	// Read the RFC 7239 Forwarded field instead of X-Forwarded-For.
	Forwarded bool `json:"forwarded,omitempty"`

	// A shared secret the edge sends in a header to prove itself. The
	// header never goes upstream.
	Secret *Secret `json:"secret,omitempty"`

	// At a PoP: sign the resolved client into a header for an edgekit
	// origin further in, which verifies it. With neither trusted_proxies,
	// secret nor verify, nothing is in front of this Caddy and the client
	// is the peer.
	Sign *Sign `json:"sign,omitempty"`

	// At an origin behind edgekit PoPs: take the client from the PoP's
	// signed assertion, and only from a valid one. Replaces the chain, so
	// it excludes hops, header and forwarded.
	Verify *Verify `json:"verify,omitempty"`

	// What to do with requests that did not verifiably come through the
	// edge: `allow` (default), `observe` (allow, count and log) or `reject`.
	Untrusted Untrusted `json:"untrusted,omitempty"`

	// Status for `untrusted: reject`, 4xx or 5xx. Default 403.
	RejectStatus int `json:"reject_status,omitempty"`

	// Trust a peer on a Unix socket (a local proxy) as the first trusted
	// layer, as Caddy's trusted_proxies_unix does. Default off: such a
	// peer is never the edge.
	TrustedProxiesUnix bool `json:"trusted_proxies_unix,omitempty"`

	// Client-address headers removed from every request, whether or not
	// it came through the edge. Default: X-Real-IP, True-Client-IP,
	// CF-Connecting-IP, Fastly-Client-IP, X-Client-IP,
	// X-Cluster-Client-IP, Client-IP, Forwarded, CloudFront-Viewer-Address,
	// X-Envoy-External-Address, X-Originating-IP, X-Remote-IP,
	// X-Remote-Addr, X-ProxyUser-Ip, X-Forwarded, Forwarded-For and
	// X-Original-Forwarded-For. Through the edge, the
	// configured `header` is rewritten to the resolved client instead, and
	// in `forwarded` mode Forwarded is trimmed to start at the client's
	// element. Not through the edge, the configured `header`,
	// X-Forwarded-For, X-Forwarded-Host, X-Forwarded-Proto and Forwarded
	// are removed too, whatever this list says. X-Forwarded-For is never
	// removed through the edge: it is rewritten to start at the client.
	Strip []string `json:"strip,omitempty"`

	resolver     resolver
	signer       *signer
	sourceName   string   // module ID of trusted_proxies_source; "" without one
	replayKey    string   // the shared record of used assertions held; "" when none
	strip        []string // canonical names removed not through the edge
	stripTrusted []string // canonical names removed through the edge
	counters     *counters
	logger       *zap.Logger
}

// Secret is a header the edge sends with a shared value.
type Secret struct {
	// Header name, e.g. X-Edge-Secret.
	Header string `json:"header,omitempty"`
	// The value; placeholders such as {env.EDGE_SECRET} are expanded when
	// the config loads, and each must resolve to something non-empty.
	Value string `json:"value,omitempty"`
}

// Sign is the PoP's side of signed edge assertions.
type Sign struct {
	// The header written (any the caller sent is replaced). Default
	// X-Edge-Assertion.
	Header string `json:"header,omitempty"`
	// The key signed with; its id goes into every assertion.
	Key *AssertionKey `json:"key,omitempty"`
}

// Verify is the origin's side of signed edge assertions.
type Verify struct {
	// The header read, then removed whatever the outcome. Default
	// X-Edge-Assertion.
	Header string `json:"header,omitempty"`
	// The keys accepted, by id: during a rotation, the old and the new.
	Keys []AssertionKey `json:"keys,omitempty"`
	// How long after signing an assertion is accepted, 2s..5m. Default
	// 30s. A PoP's clock may run up to 5s ahead of this one.
	MaxAge *caddy.Duration `json:"max_age,omitempty"`
	// Each assertion is accepted once: up to this many accepted
	// assertions are remembered until they expire, 1024..16000000,
	// default 1000000. Give at least the signed requests per second times
	// 1.2 x max_age + 5s (the default holds 24,000 per second with max_age
	// 30s), about 50 bytes each. When it is full, further assertions are
	// refused (assertion_replay_cache_full) until remembered ones expire.
	ReplayCacheSize int `json:"replay_cache_size,omitempty"`
}

// AssertionKey is an HMAC-SHA256 key and the id assertions name it by.
type AssertionKey struct {
	// 1..32 characters of A-Z a-z 0-9 . _ -
	ID string `json:"id,omitempty"`
	// At least 32 bytes once placeholders such as {env.EDGE_KEY_K2} are
	// expanded (when the config loads; each must resolve to something).
	Secret string `json:"secret,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.client_ip",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision sets defaults and compiles the configuration.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if h.Hops == nil && !h.Recursive {
		one := 1
		h.Hops = &one
	}
	if h.Untrusted == "" {
		h.Untrusted = UntrustedAllow
	}
	if h.RejectStatus == 0 && h.Untrusted == UntrustedReject {
		h.RejectStatus = http.StatusForbidden
	}

	rs := &h.resolver
	if h.Hops != nil {
		rs.hops = *h.Hops
	}
	rs.recursive = h.Recursive
	rs.unix = h.TrustedProxiesUnix
	rs.source = sourceXFF
	rs.headers, rs.xffFallback = nil, false
	for _, name := range h.headerList() {
		if name := http.CanonicalHeaderKey(name); name == "X-Forwarded-For" && len(h.Headers) > 1 {
			rs.xffFallback = true // validated to be last
		} else {
			rs.headers = append(rs.headers, name)
		}
	}
	switch {
	case len(rs.headers) > 0:
		rs.source = sourceHeader
	case h.Forwarded:
		rs.source = sourceForwarded
	}
	if h.TrustedProxies != nil {
		rs.trusted = []netip.Prefix{}
		for _, expr := range h.TrustedProxies {
			if expr == "private_ranges" {
				for _, cidr := range caddyhttp.PrivateRangesCIDR() {
					p, _ := caddyhttp.CIDRExpressionToPrefix(cidr)
					rs.trusted = append(rs.trusted, unmapPrefix(p))
				}
				continue
			}
			p, err := parseTrustedProxy(expr)
			if err != nil {
				return err
			}
			rs.trusted = append(rs.trusted, unmapPrefix(p))
		}
	}
	if h.TrustedProxiesSourceRaw != nil {
		if err := h.loadRangeSource(ctx); err != nil {
			return err
		}
	}
	if h.Secret != nil {
		rs.secretHeader = http.CanonicalHeaderKey(h.Secret.Header)
		var err error
		if rs.secret, err = expandSecret("secret "+h.Secret.Header, h.Secret.Value, "the secret the edge sends"); err != nil {
			return err
		}
	}

	if h.Sign != nil {
		if err := h.provisionSign(); err != nil {
			return err
		}
	}
	if h.Verify != nil {
		if err := h.provisionVerify(); err != nil {
			return err
		}
	}
	rs.direct = !h.edgeVerified() && h.Sign != nil

	h.compileStrip()

	var err error
	h.counters, err = newCounters(ctx.GetMetricsRegistry(), string(h.Untrusted))
	return err
}

// compileStrip builds the two lists of headers ServeHTTP removes: strip
// (not through the edge: the configured headers, the whole forwarding chain
// and the strip list) and stripTrusted (through the edge: the strip list,
// Forwarded and the configured headers, less what is rewritten from the
// resolved client instead: X-Forwarded-For, Forwarded in Forwarded mode;
// ServeHTTP keeps the one header it read and rewrites it).
func (h *Handler) compileStrip() {
	names := h.Strip
	if len(names) == 0 {
		names = defaultStrip
	}
	add := func(list []string, names ...string) []string {
		for _, name := range names {
			if name := http.CanonicalHeaderKey(name); !slices.Contains(list, name) {
				list = append(list, name)
			}
		}
		return list
	}
	h.strip, h.stripTrusted = nil, nil
	h.strip = add(h.strip, h.resolver.headers...)
	h.strip = add(h.strip, untrustedChain...)
	h.strip = add(h.strip, names...)

	// The header read (one of the list, per request) is kept by ServeHTTP
	// and rewritten; the others of the list go.
	rewritten := []string{"X-Forwarded-For"}
	if h.resolver.source == sourceForwarded {
		rewritten = append(rewritten, "Forwarded")
	}
	for _, name := range add(add(add(nil, names...), "Forwarded"), h.resolver.headers...) {
		if !slices.Contains(rewritten, name) {
			h.stripTrusted = append(h.stripTrusted, name)
		}
	}
}

// edgeVerified reports whether something proves a request came through the
// edge: its addresses (a list or a source), a secret or a signed assertion.
// Without any, a handler that signs has nothing in front of it (direct).
func (h *Handler) edgeVerified() bool {
	return h.TrustedProxies != nil || h.sourceName != "" || h.TrustedProxiesUnix || h.Secret != nil || h.Verify != nil
}

// headerList is header or headers, whichever is set.
func (h *Handler) headerList() []string {
	if h.Header != "" {
		return []string{h.Header}
	}
	return h.Headers
}

// Validate refuses configurations that could not verify the edge or that
// make no sense.
func (h *Handler) Validate() error {
	if err := h.validateDepth(); err != nil {
		return err
	}
	if !h.edgeVerified() && h.Sign == nil {
		return errors.New("client_ip: nothing verifies the edge: set trusted_proxies (the edge's addresses, or in trusted_proxies_source a module that supplies them), secret (a header the edge sends) and/or verify (the edge's signed assertion); a PoP with nothing in front of it may have just sign")
	}
	if err := h.validateAssertions(); err != nil {
		return err
	}
	if h.TrustedProxies != nil && len(h.TrustedProxies) == 0 && h.sourceName == "" {
		return errors.New("client_ip: trusted_proxies is empty: list the edge's addresses or omit it and use secret")
	}
	if family, ok := coversEverything(h.resolver.trusted); ok {
		what := "trusted_proxies"
		if h.resolver.ranges == nil && h.sourceName != "" {
			what = "trusted_proxies with trusted_proxies_source static" // folded into the fixed list
		}
		return fmt.Errorf("client_ip: %s covers every %s address, so any caller could pose as the edge: list only the edge's own ranges", what, family)
	}
	if err := h.validateHeaders(); err != nil {
		return err
	}
	if h.Secret != nil {
		if err := validHeaderName("secret", h.Secret.Header); err != nil {
			return err
		}
	}
	for _, name := range h.Strip {
		if err := validHeaderName("strip", name); err != nil {
			return err
		}
	}
	if _, err := parseUntrusted(string(h.Untrusted)); err != nil {
		return err
	}
	if h.Untrusted == UntrustedReject {
		return checkRejectStatus(h.RejectStatus)
	}
	if h.RejectStatus != 0 {
		return fmt.Errorf("client_ip: reject_status %d is set but untrusted is %s: use untrusted reject %d", h.RejectStatus, h.Untrusted, h.RejectStatus)
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
