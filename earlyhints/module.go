// Package earlyhints is the http.handlers.early_hints module: it learns
// the preload, modulepreload and preconnect Link fields of an origin's
// HTML pages and, on a later navigation to the same page, sends them at
// once in a 103 Early Hints response (RFC 8297), before the request goes
// upstream, so the browser fetches the page's scripts and styles while the
// origin works.
//
//	early_hints {
//	    allow_origin https://cdn.example.com
//	    link /app.css preload style
//	}
//
// Links are learned only from 2xx HTML responses a shared cache could give
// anyone (no Set-Cookie, not private or no-store, ...), judged on the
// header as the client receives it (after the header directive's deferred
// changes), keyed on the host and the path the client asked for (before
// rewrite or try_files), and only same-site links (or those of
// allow_origin). See docs/early-hints.md.
package earlyhints

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-edgekit/edgekit/internal/enum"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// HintOn says which requests get hints.
type HintOn string

const (
	// HintNavigate hints GET requests with Sec-Fetch-Mode: navigate.
	HintNavigate HintOn = "navigate"
	// HintAny hints every GET request the handler's matcher matches.
	HintAny HintOn = "any"
)

// Defaults and limits of the store.
const (
	defaultMaxPaths = 10000
	defaultMaxBytes = 16 << 20
	defaultMaxAge   = time.Hour
	maxManualLinks  = maxPathLinks
	// The largest max_paths and max_bytes accepted: the store is in
	// memory on every PoP, and a value past these is a typo (or a unit
	// mistaken) rather than a plan. Each path costs at least entrySize
	// bytes, so 1 GiB holds under 7 million paths anyway.
	maxMaxPaths = 10_000_000
	maxMaxBytes = 1 << 30
	// The smallest max_bytes accepted: one path's largest entry (its
	// overhead, the longest key kept and 16 links of the longest length),
	// so that any learnable page fits; a store smaller than that would
	// silently keep nothing of some pages (and, below entrySize, of any).
	minMaxBytes = entrySize + maxKeyLen + maxPathLinks*(maxLinkLen+linkOverhead)
)

// Handler sends learned and configured links in a 103 Early Hints response.
type Handler struct {
	// AllowOrigin are the origins ("https://cdn.example.com") besides the
	// request's own whose links are learned and hinted. Default: none,
	// so only relative links and links to the request's scheme and host.
	AllowOrigin []string `json:"allow_origin,omitempty"`

	// Links are hinted on every navigation, before the learned ones.
	Links []Link `json:"links,omitempty"`

	// HintOn is "navigate" (default: GET with Sec-Fetch-Mode: navigate)
	// or "any" (every GET the handler's matcher lets in).
	HintOn HintOn `json:"hint_on,omitempty"`

	// HTTP1 also hints HTTP/1.1 requests (never HTTP/1.0, which gets no
	// 1xx: RFC 9110 §15.2). Default false: some HTTP/1.1 clients take a
	// 1xx for the final response (see docs/early-hints.md).
	HTTP1 bool `json:"http1,omitempty"`

	// MaxPaths bounds the learned paths (LRU). Default 10000.
	MaxPaths int `json:"max_paths,omitempty"`

	// MaxBytes bounds the bytes the learned links and their keys take.
	// Default 16 MiB, at least 18848 (one path's largest entry).
	MaxBytes int64 `json:"max_bytes,omitempty"`

	// MaxAge is how long learned links are hinted without being seen
	// again. Default 1h.
	MaxAge caddy.Duration `json:"max_age,omitempty"`

	// Learn turns learning off when false (only Links are hinted).
	// Default true.
	Learn *bool `json:"learn,omitempty"`

	manual  []string
	origins []string // lowercased scheme://host[:port]
	learn   bool
	store   *store
}

// Link is one link configured by hand.
type Link struct {
	// URL is the target: a path ("/app.css") or an absolute URL.
	URL string `json:"url"`
	// Rel is preload, modulepreload or preconnect.
	Rel string `json:"rel"`
	// As is the preload destination (script, style, font, image...).
	As string `json:"as,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.early_hints",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision checks the configuration, makes the store and registers the
// metrics.
func (h *Handler) Provision(ctx caddy.Context) error {
	if err := h.Validate(); err != nil {
		return err
	}
	h.manual = h.manual[:0]
	for _, l := range h.Links {
		v, _ := l.value()
		h.manual = append(h.manual, v)
	}
	h.origins = h.origins[:0]
	for _, o := range h.AllowOrigin {
		h.origins = append(h.origins, strings.ToLower(o))
	}
	h.learn = h.Learn == nil || *h.Learn
	maxPaths, maxBytes, maxAge := h.MaxPaths, h.MaxBytes, time.Duration(h.MaxAge)
	if maxPaths == 0 {
		maxPaths = defaultMaxPaths
	}
	if maxBytes == 0 {
		maxBytes = defaultMaxBytes
	}
	if maxAge == 0 {
		maxAge = defaultMaxAge
	}
	h.store = newStore(maxPaths, maxBytes, maxAge)
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("early_hints: registering metrics: %w", err)
	}
	return nil
}

// Cleanup empties the store when the config that made this handler is
// unloaded (see store.close): a replaced handler still serving an old
// connection neither keeps nor learns links.
func (h *Handler) Cleanup() error {
	if h.store != nil {
		h.store.close()
	}
	return nil
}

// Validate checks the configuration.
func (h *Handler) Validate() error {
	if h.HintOn != "" {
		if _, err := enum.Parse(string(h.HintOn), HintNavigate, HintAny); err != nil {
			return fmt.Errorf("early_hints: hint_on: %w", err)
		}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"max_paths", int64(h.MaxPaths)}, {"max_bytes", h.MaxBytes}, {"max_age", int64(h.MaxAge)}} {
		if f.v < 0 {
			return fmt.Errorf("early_hints: %s %d: must not be negative; leave it out (or 0) for the default", f.name, f.v)
		}
	}
	if err := checkBounds(int64(h.MaxPaths), h.MaxBytes); err != nil {
		return fmt.Errorf("early_hints: %w", err)
	}
	for _, o := range h.AllowOrigin {
		if err := checkOrigin(o); err != nil {
			return fmt.Errorf("early_hints: allow_origin: %w", err)
		}
	}
	if len(h.Links) > maxManualLinks {
		return fmt.Errorf("early_hints: links: %d links; at most %d (a 103 holds at most %d): keep those the page needs first", len(h.Links), maxManualLinks, maxPathLinks)
	}
	for _, l := range h.Links {
		if _, err := l.value(); err != nil {
			return fmt.Errorf("early_hints: link: %w", err)
		}
	}
	return h.checkLinkOrigins()
}

// value is the Link field value of a configured link, or why it cannot
// be one. The text is parsed back with the same parser that reads an
// upstream's links, so config text can add no field or parameter.
func (l Link) value() (string, error) {
	if !contains(hintRels, l.Rel) {
		return "", fmt.Errorf("%q: rel %q must be preload, modulepreload or preconnect", l.URL, l.Rel)
	}
	if !validTarget(l.URL) {
		return "", fmt.Errorf("%q: not a URL of printable ASCII without spaces, quotes, <, > or backslash", l.URL)
	}
	// One link is hinted to every visitor: it is sent as written, never
	// expanded per request.
	if strings.ContainsAny(l.URL, "{}") {
		return "", fmt.Errorf("%q: placeholders are not expanded in a link (it is the same for every visitor): write the URL itself, with %%7B and %%7D for a literal { and }", l.URL)
	}
	if u, _ := url.Parse(l.URL); u.User != nil {
		return "", fmt.Errorf("%q: a link has no user name or password (userinfo before @): write the URL without it", l.URL)
	}
	v := "<" + l.URL + ">; rel=" + l.Rel
	if l.As != "" {
		if tokenLen(l.As) != len(l.As) {
			return "", fmt.Errorf("%q: as %q must be a token such as script, style or font", l.URL, l.As)
		}
		v += "; as=" + l.As
	}
	if got := parseLinks([]string{v}); len(got) != 1 || got[0].value != v {
		return "", fmt.Errorf("%q: does not serialise to one link", l.URL)
	}
	return v, nil
}

// checkBounds refuses a max_paths or max_bytes past its bound.
func checkBounds(maxPaths, maxBytes int64) error {
	if maxPaths > maxMaxPaths {
		return fmt.Errorf("max_paths %d: at most %d: the store is held in memory; leave it out for the default %d", maxPaths, maxMaxPaths, defaultMaxPaths)
	}
	if maxBytes > maxMaxBytes {
		return fmt.Errorf("max_bytes %d: at most %d (1 GiB): the store is held in memory; leave it out for the default %d (16 MiB)", maxBytes, maxMaxBytes, defaultMaxBytes)
	}
	if maxBytes > 0 && maxBytes < minMaxBytes {
		return fmt.Errorf("max_bytes %d: at least %d, one path's largest entry (a smaller store cannot keep some pages' links); leave it out for the default %d (16 MiB)", maxBytes, minMaxBytes, defaultMaxBytes)
	}
	return nil
}

// checkOrigin accepts a serialised http(s) origin, scheme://host[:port],
// in the one spelling a link's origin is compared in (case aside): a
// port of 1-65535 other than the scheme's default, a host name of
// letters, digits, hyphens and dots, an IPv4 address or a bracketed IPv6
// address. There are no wildcards: an origin allowed is one the operator
// named, never every subdomain (one of which may be anyone's).
func checkOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
		u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(o, " \t\r\n,;\"\\") || u.Opaque != "" {
		return fmt.Errorf("%q: want an origin such as https://cdn.example.com (scheme and host, nothing after)", o)
	}
	host, port := u.Hostname(), u.Port()
	if strings.Contains(host, "*") {
		return fmt.Errorf("%q: allow_origin has no wildcards: name each origin, e.g. https://cdn.example.com", o)
	}
	if strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("%q: no port after ':': write %s://%s", o, u.Scheme, strings.TrimSuffix(u.Host, ":"))
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return fmt.Errorf("%q: port %q must be 1-65535, without leading zeros", o, port)
		}
		if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
			return fmt.Errorf("%q: a link to the default port names the same origin: write %s://%s, without :%s", o, u.Scheme, strings.TrimSuffix(u.Host, ":"+port), port)
		}
	}
	if strings.HasPrefix(u.Host, "[") {
		if a, err := netip.ParseAddr(host); err != nil || !a.Is6() || a.Zone() != "" {
			return fmt.Errorf("%q: %q is not an IPv6 address", o, host)
		}
		return nil
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || strings.Trim(label, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" {
			return fmt.Errorf("%q: %q is not a host name (letters, digits, hyphens, dots) or IP address", o, host)
		}
	}
	return nil
}

// checkLinkOrigins holds the configured links to the origins learned
// links are held to: a relative link is the site's own; an absolute one
// must be on an allow_origin. The handler does not know its site's
// hosts (a site block may name several, or a wildcard), so a link to the
// site itself is written relative, or its origin listed.
func (h *Handler) checkLinkOrigins() error {
	for _, l := range h.Links {
		u, err := url.Parse(l.URL)
		if err != nil {
			return fmt.Errorf("early_hints: link %q: %w", l.URL, err)
		}
		if u.Scheme == "" {
			if strings.HasPrefix(l.URL, "//") {
				return fmt.Errorf("early_hints: link %q: write it with its scheme (https:%s), or relative to the site", l.URL, l.URL)
			}
			continue
		}
		scheme := strings.ToLower(u.Scheme)
		if (scheme != "http" && scheme != "https") || u.Host == "" {
			return fmt.Errorf("early_hints: link %q: a hint names an http or https URL, or a path", l.URL)
		}
		origin := originOf(scheme, u.Host)
		allowed := false
		for _, o := range h.AllowOrigin {
			allowed = allowed || strings.ToLower(o) == origin
		}
		if !allowed {
			return fmt.Errorf("early_hints: link %q: its origin %s is not in allow_origin: add \"allow_origin %s\", or write the link relative to the site", l.URL, origin, origin)
		}
	}
	return nil
}

// originOf is the serialised origin of a scheme and host as allow_origin
// holds them: lowercase, without the scheme's default port.
func originOf(scheme, host string) string {
	scheme, host = strings.ToLower(scheme), strings.ToLower(host)
	if (scheme == "https" && strings.HasSuffix(host, ":443")) || (scheme == "http" && strings.HasSuffix(host, ":80")) {
		host = host[:strings.LastIndexByte(host, ':')]
	}
	return scheme + "://" + host
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
