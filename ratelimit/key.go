package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// defaultKey is the caller as client_ip resolved it.
const defaultKey = "{http.vars.client_ip}"

// keyTemplate turns a request into a zone key.
type keyTemplate struct {
	template string
	// clientIP is the fast path for the default key: read the client_ip
	// variable directly, no placeholder expansion, no allocation.
	clientIP bool
	// addrKey: the template is one placeholder whose value is an address
	// (the caller's, as Caddy or client_ip found it), so the key is cut to
	// the zone's prefixes. Any other template is text as it is, however
	// much it looks like an address: a caller writes it, and as an address
	// it would be the budget of the caller at that address (the one
	// on_empty_key client_ip falls back to) or share one with the prefix.
	addrKey bool
	// placeholder is the name when the template is one placeholder and
	// nothing else: Get it from the replacer, sparing ReplaceAll's builder.
	placeholder string
	// literal is the length of what the template expands to when every
	// placeholder in it is empty: an expansion of that length carries
	// nothing of the request (each placeholder adds its value's length);
	// -1 for a template without placeholders, a budget shared on purpose.
	literal int
	v4bits  int
	v6bits  int
	onEmpty OnEmptyKey
}

// parseKeyTemplate checks that every placeholder in s is well formed: each
// `{` is closed by a `}` before the next `{`, names are non-empty, and a
// backslash escapes the next brace.
func parseKeyTemplate(s string) (keyTemplate, error) {
	if strings.TrimSpace(s) == "" {
		return keyTemplate{}, fmt.Errorf("key is empty: use a placeholder such as {client_ip} or {http.request.header.X-Api-Key}")
	}
	open, placeholders := -1, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			if open >= 0 {
				return keyTemplate{}, fmt.Errorf("key %q: placeholder at %d is not closed before the next {", s, open)
			}
			open = i
		case '}':
			if open < 0 {
				return keyTemplate{}, fmt.Errorf("key %q: } at %d closes nothing", s, i)
			}
			if i == open+1 {
				return keyTemplate{}, fmt.Errorf("key %q: empty placeholder {} at %d", s, open)
			}
			if err := checkPlaceholder(s[open+1 : i]); err != nil {
				return keyTemplate{}, fmt.Errorf("key %q: %v", s, err)
			}
			placeholders++
			open = -1
		}
	}
	if open >= 0 {
		return keyTemplate{}, fmt.Errorf("key %q: placeholder at %d is not closed", s, open)
	}
	k := keyTemplate{
		template: s,
		clientIP: s == defaultKey || s == "{client_ip}",
		literal:  -1, // no placeholder: one budget for all, on purpose
	}
	if placeholders > 0 {
		k.literal = len(caddy.NewEmptyReplacer().ReplaceAll(s, ""))
	}
	if name, ok := strings.CutPrefix(s, "{"); ok && !k.clientIP {
		if name, ok = strings.CutSuffix(name, "}"); ok && !strings.ContainsAny(name, "{}\\") {
			k.placeholder = name
		}
	}
	k.addrKey = k.clientIP || k.placeholder == "http.request.remote.host"
	return k, nil
}

// checkPlaceholder refuses, in a key, a placeholder that cannot have a
// value where throttle runs: one Caddy does not know under
// http.request. (a typo such as {http.request.headr.X-Api-Key}, which
// would be empty on every request), or one set only once the request has
// been decided (the response, the upstream, an error for handle_errors), or
// one that differs on every request ({time.*}, {http.request.uuid}).
// Caddy's own replacer says which http.request. names exist. What depends
// on the route (a variable, {http.auth.user.id}, which is empty unless
// authentication ran before throttle) cannot be known here: Caddy
// provisions a handler without telling it what runs before it, so the
// first request that finds such a key empty logs a warning with the fix,
// and on_empty_key decides.
func checkPlaceholder(name string) error {
	for _, late := range []struct{ prefix, what string }{
		{"http.response.", "the response"},
		{"http.reverse_proxy.", "reverse_proxy's upstream"},
		{"http.error.", "an error, for handle_errors"},
		{"err.", "an error, for handle_errors"},
	} {
		if strings.HasPrefix(name, late.prefix) {
			return fmt.Errorf("{%s} has a value only after throttle has decided (it belongs to %s): key on the request, e.g. {http.request.header.X-Api-Key}, {client_ip} or {http.auth.user.id}", name, late.what)
		}
	}
	if name == "time" || strings.HasPrefix(name, "time.") {
		return fmt.Errorf("{%s} is the time of each request, so no two requests would share a key and no caller would ever be limited: key on who calls, e.g. {client_ip} or {http.request.header.X-Api-Key}", name)
	}
	switch name {
	case "http.request.uuid", "http.request.duration", "http.request.duration_ms":
		return fmt.Errorf("{%s} differs on every request, so no caller would ever be limited: key on who calls, e.g. {client_ip} or {http.request.header.X-Api-Key}", name)
	case "http.request.body", "http.request.body_base64":
		return fmt.Errorf("{%s} would read the whole request body into memory before the limit decides, for every caller, limited or not: key on who calls, e.g. {client_ip} or {http.request.header.X-Api-Key}", name)
	}
	if strings.HasPrefix(name, "http.request.") {
		if !requestPlaceholder(name) {
			return fmt.Errorf("{%s} is not a placeholder Caddy knows, so it would be empty on every request (one budget for every caller): check its spelling, e.g. {http.request.header.<Field>}, {http.request.cookie.<name>}, {http.request.uri.query.<param>}, {http.request.remote.host}", name)
		}
	}
	return nil
}

// requestPlaceholder reports whether Caddy knows the http.request.
// placeholder name: its replacer, on a request of its own (one per check:
// some placeholders keep state in their request), with what Caddy's server
// puts in a request's context (some placeholders assume it is there). A
// placeholder that panics all the same is taken as known: the check must
// never end the process that loads a config.
func requestPlaceholder(name string) (known bool) {
	defer func() {
		if recover() != nil {
			known = true
		}
	}()
	ctx := context.WithValue(context.Background(), caddyhttp.VarsCtxKey, map[string]any{})
	ctx = context.WithValue(ctx, caddyhttp.ExtraLogFieldsCtxKey, new(caddyhttp.ExtraLogFields))
	r, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost/", http.NoBody)
	repl := caddyhttp.NewTestReplacer(r)
	_, known = repl.Get(name)
	return known
}

// requestKey is one zone's key for one request: an address (already cut to
// its prefix) when the template is an address placeholder and its value an
// IP, else the expanded template as text. Addresses, text, and a peer that
// is no IP (a Unix socket) are three namespaces (hash seed, pk's first
// byte, Redis name's first character): no text a caller writes is ever
// the key of an address or of a peer.
type requestKey struct {
	addr   netip.Prefix
	isAddr bool
	// peer: text is the caller's peer as the fallback found it, not an IP.
	peer bool
	text string
}

// key expands the template for r, whose Caddy variables are vars
// (varsOf(r)). An address placeholder's IP is grouped
// by its prefix, so 2001:db8:1:2::a and ::b are one caller. empty
// reports a template whose every placeholder expanded to nothing: as it
// is, that key would be one budget shared by every such caller, so the
// zone's on_empty_key decides instead.
func (k *keyTemplate) key(r *http.Request, vars map[string]any) (rk requestKey, empty bool) {
	if k.clientIP {
		return k.callerAddr(r, vars), false
	}
	var s string
	{
		repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		if repl == nil {
			repl = caddy.NewReplacer()
		}
		if k.placeholder != "" {
			// What ReplaceAll(k.template, "") gives: unknown is empty.
			v, _ := repl.Get(k.placeholder)
			s = caddy.ToString(v)
		} else {
			s = repl.ReplaceAll(k.template, "")
		}
	}
	return k.fromString(s), len(s) == k.literal
}

// varsOf is r's Caddy variables (nil outside Caddy's server): read once per
// request, as caddyhttp.GetVar would read them for each name, for each
// lookup walks the request's context chain, which Caddy makes deep.
func varsOf(r *http.Request) map[string]any {
	vars, _ := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
	return vars
}

// fromString is the key for the template's expansion s: an address
// prefix for an address template whose value is an IP, else text.
func (k *keyTemplate) fromString(s string) requestKey {
	if k.addrKey {
		if rk, ok := k.addrPrefix(s); ok {
			return rk
		}
	}
	return requestKey{text: s}
}

// callerAddr is the caller's address, as client_ip resolved it (else the
// TCP peer), cut to the zone's prefix: the default key, and what an empty
// key falls back to under on_empty_key client_ip. vars are r's Caddy
// variables (varsOf(r)).
func (k *keyTemplate) callerAddr(r *http.Request, vars map[string]any) requestKey {
	s, _ := vars[caddyhttp.ClientIPVarKey].(string)
	if s == "" {
		s, _, _ = net.SplitHostPort(r.RemoteAddr)
	}
	if rk, ok := k.addrPrefix(s); ok {
		return rk
	}
	return requestKey{text: s, peer: true}
}

// addrPrefix is s, an IP address, cut to the zone's prefix (IPv4-mapped
// IPv6 as IPv4, without a zone); ok false if s is no IP.
func (k *keyTemplate) addrPrefix(s string) (requestKey, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap().WithZone("")
		bits := k.v6bits
		if a.Is4() {
			bits = k.v4bits
		}
		if p, err := a.Prefix(bits); err == nil {
			return requestKey{addr: p, isAddr: true}, true
		}
	}
	return requestKey{}, false
}

// The hash seeds are per process: keys are hashed for the memory store, and
// seeds nobody outside knows keep crafted keys from colliding on purpose.
// Each namespace has its own, so a text whose bytes are an address's (or a
// peer's name) is another key.
var (
	hashSeed = maphash.MakeSeed()
	addrSeed = maphash.MakeSeed()
	peerSeed = maphash.MakeSeed()
)

// hash is the memory store's 64-bit key.
func (rk requestKey) hash() uint64 {
	if rk.isAddr {
		a := rk.addr.Addr().As16()
		var b [17]byte
		copy(b[:], a[:])
		b[16] = byte(rk.addr.Bits())
		return maphash.Bytes(addrSeed, b[:])
	}
	if rk.peer {
		return maphash.String(peerSeed, rk.text)
	}
	return maphash.String(hashSeed, rk.text)
}

// appendRedisName appends the key's name inside a zone in Redis: an
// address prefix as it is (192.0.2.1/32), a text key as `#` and the hex of
// its SHA-256 (a peer that is no IP: `%` and the hex). A text key is whatever the caller sent (an API key, a
// bearer token): its name must not show it to whoever lists, monitors or
// dumps the Redis, and it must be the same on every Caddy node, which
// share no secret: so an unkeyed hash, which hides a key with enough
// entropy (a token) but not one that can be guessed (a user name).
func (rk requestKey) appendRedisName(b []byte) []byte {
	if rk.isAddr {
		b = rk.addr.Addr().AppendTo(b)
		b = append(b, '/')
		return strconv.AppendInt(b, int64(rk.addr.Bits()), 10)
	}
	sum := sha256.Sum256([]byte(rk.text))
	mark := byte('#')
	if rk.peer {
		mark = '%'
	}
	return hex.AppendEncode(append(b, mark), sum[:])
}
