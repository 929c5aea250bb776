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
// anyone (no Set-Cookie, not private or no-store, ...), and only same-site
// links (or those of allow_origin). See docs/early-hints.md.
package earlyhints

import (
	"errors"
	"fmt"
	"net/url"
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

	// HTTP1 also hints HTTP/1.x requests. Default false: some HTTP/1.1
	// clients take a 1xx for the final response (see docs/early-hints.md).
	HTTP1 bool `json:"http1,omitempty"`

	// MaxPaths bounds the learned paths (LRU). Default 10000.
	MaxPaths int `json:"max_paths,omitempty"`

	// MaxBytes bounds the bytes the learned links and their keys take.
	// Default 16 MiB.
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
	if h.MaxPaths < 0 || h.MaxBytes < 0 || h.MaxAge < 0 {
		return errors.New("early_hints: max_paths, max_bytes and max_age must not be negative (0 is the default)")
	}
	for _, o := range h.AllowOrigin {
		if err := checkOrigin(o); err != nil {
			return fmt.Errorf("early_hints: allow_origin: %w", err)
		}
	}
	if len(h.Links) > maxManualLinks {
		return fmt.Errorf("early_hints: %d links; at most %d", len(h.Links), maxManualLinks)
	}
	for _, l := range h.Links {
		if _, err := l.value(); err != nil {
			return fmt.Errorf("early_hints: link: %w", err)
		}
	}
	return nil
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

// checkOrigin accepts a serialised http(s) origin: scheme://host[:port].
func checkOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
		u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(o, " \t\r\n,;\"\\") || u.Opaque != "" {
		return fmt.Errorf("%q: want an origin such as https://cdn.example.com (scheme and host, nothing after)", o)
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
