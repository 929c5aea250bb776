// Package substitute is the http.handlers.substitute module: streaming find
// and replace on response bodies, for every rule in one pass, with memory
// bounded by max_match per response whatever the body size.
package substitute

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-edgekit/edgekit/substitute/internal/engine"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Defaults and bounds.
const (
	// DefaultMemo is the number of representations the memo remembers.
	DefaultMemo = 10_000
	// MemoOff in Handler.Memo turns the memo off.
	MemoOff = -1

	minMaxMatch = 64
	maxMaxMatch = 16 << 20
	maxMemo     = 10_000_000
)

// DefaultTypes are the media types substituted when Types is empty.
var DefaultTypes = []string{
	"text/html",
	"application/xhtml+xml",
	"text/css",
	"text/javascript",
	"application/javascript",
	"application/json",
	"application/manifest+json",
	"application/xml",
	"text/xml",
	"image/svg+xml",
	"text/plain",
}

// Handler rewrites response bodies on the fly: every rule is compiled once
// into one automaton and the body is scanned once, as it streams.
type Handler struct {
	// Rules to apply, in declaration order (which breaks ties).
	Rules []Rule `json:"rules,omitempty"`

	// Media types to substitute, without parameters (charset is ignored
	// when matching); "type/*" matches a whole top-level type. Default:
	// DefaultTypes.
	Types []string `json:"types,omitempty"`

	// Status codes to substitute; a single digit n stands for the class
	// nxx. Default: every status that has a body.
	Status []int `json:"status,omitempty"`

	// Priority between matches starting at the same position: "longest"
	// (default: longest match, then the rule declared first) or "first"
	// (the rule declared first, as nginx's replace_filter).
	Priority Priority `json:"priority,omitempty"`

	// MaxMatch is the longest match, in bytes, that can be replaced; it
	// bounds the bytes held back per response. Omitted: 16 KiB; an
	// explicit 0 is refused, like any value outside 64 B..16 MiB.
	MaxMatch int `json:"max_match,omitempty"`

	// Memo is how many representations remember the strong ETag of a body
	// that matched no rule, so that the next identical body is streamed
	// without scanning. A representation is the method, Host with port,
	// escaped path and query, the request's Cookie and Authorization, and
	// the request fields the response's Vary names; responses with
	// Set-Cookie, Cache-Control private or no-store, or Vary: * are never
	// remembered. 0 selects the default (10,000); -1 turns the memo off.
	Memo int `json:"memo,omitempty"`

	// Headers names response header fields (case-insensitive) to which
	// the rules also apply, whatever the response's type, status or
	// Cache-Control: no-transform (which is about the body), on every
	// response including redirects, 304s, HEAD and 1xx (103 Early Hints).
	// Each value of a field is rewritten on its own (Set-Cookie is never
	// joined). A value whose rewrite cannot be sent (it would hold a
	// control character or pass 64 KiB, the upstream's value is over
	// 64 KiB, or the response's 1 MiB budget is spent) is removed, never
	// sent as the upstream wrote it, and counted. Fields that frame
	// or encode the message (Content-Length, Content-Encoding,
	// Transfer-Encoding...) are refused, and so are rules whose
	// replacement text holds a control character. Default: none.
	Headers []string `json:"headers,omitempty"`

	maxMatchSet bool // max_match was in the JSON, even as 0

	set      *engine.Set
	priority engine.Priority
	memo     *memo
	writers  *sync.Pool
	logger   *zap.Logger

	// headerNames is nil when Headers is empty: then rewriting costs a
	// nil check per response.
	headerNames *headerNames
}

// Rule is one find-and-replace rule.
type Rule struct {
	// Find is literal text, or an RE2 pattern if Regex is set.
	Find string `json:"find"`
	// Regex makes Find a regular expression (RE2 syntax).
	Regex bool `json:"regex,omitempty"`
	// Replace is the replacement. A known {placeholder} is expanded per
	// request (its value is never expanded further). In a regex rule, $1,
	// ${name} and $0 refer to capture groups and $$ is a literal $, read
	// as regexp.Expand reads them ($1é names a group "1é": write ${1}é);
	// in a literal rule, $ is written as is ("$5" gives $5).
	Replace string `json:"replace"`
	// Once makes the rule stop taking part after its first match.
	Once bool `json:"once,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.substitute",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision sets defaults and compiles the rules into one automaton.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if len(h.Types) == 0 {
		h.Types = slices.Clone(DefaultTypes) // lowered in place below
	}
	for i, t := range h.Types {
		h.Types[i] = strings.ToLower(strings.TrimSpace(t))
	}
	if h.Priority == "" {
		h.Priority = PriorityLongest
	}
	if h.MaxMatch == 0 && !h.maxMatchSet {
		h.MaxMatch = engine.DefaultMaxMatch
	}
	if h.Memo == 0 {
		h.Memo = DefaultMemo
	}
	if h.Priority == PriorityFirst {
		h.priority = engine.First
	}
	if len(h.Rules) == 0 {
		return nil // refused by Validate
	}
	rules := make([]engine.Rule, len(h.Rules))
	for i, r := range h.Rules {
		rules[i] = engine.Rule{Pattern: r.Find, Literal: !r.Regex, Replacement: r.Replace, Once: r.Once}
	}
	set, err := engine.Compile(rules, engine.Options{Priority: h.priority, MaxMatch: h.MaxMatch})
	if err != nil {
		return fmt.Errorf("substitute: %w", err)
	}
	h.set = set
	h.headerNames = newHeaderNames(h.Headers)
	if h.Memo > 0 {
		h.memo = newMemo(h.Memo)
	}
	h.writers = new(sync.Pool)
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("substitute: registering metrics: %w", err)
	}
	return nil
}

// UnmarshalJSON decodes h as usual (unknown fields refused, as Caddy does)
// and notes whether max_match was given: an explicit 0 is an error, not
// the default it would silently become.
func (h *Handler) UnmarshalJSON(b []byte) error {
	type plain Handler // without this method
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode((*plain)(h)); err != nil {
		return err
	}
	var probe struct {
		MaxMatch json.RawMessage `json:"max_match"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	h.maxMatchSet = probe.MaxMatch != nil && string(probe.MaxMatch) != "null"
	return nil
}

// Validate refuses a configuration that makes no sense.
func (h *Handler) Validate() error {
	if err := checkRuleCount(len(h.Rules)); err != nil {
		return err
	}
	if err := checkMaxMatch(h.MaxMatch); err != nil {
		return err
	}
	for i, r := range h.Rules {
		if err := checkRule(i, r, h.MaxMatch); err != nil {
			return err
		}
	}
	if err := checkHeaderNames(h.Headers); err != nil {
		return err
	}
	if len(h.Headers) > 0 {
		for i, r := range h.Rules {
			if err := checkHeaderRule(i, r); err != nil {
				return err
			}
		}
	}
	if _, err := parsePriority(string(h.Priority)); err != nil {
		return err
	}
	if err := checkMemo(h.Memo); err != nil {
		return err
	}
	for _, t := range h.Types {
		if err := checkType(t); err != nil {
			return err
		}
	}
	for _, s := range h.Status {
		if err := checkStatus(s); err != nil {
			return err
		}
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
