// Package suggest makes the error for an unknown Caddyfile subdirective
// teach: it names edgekit's equivalent of another server's or plugin's
// syntax (nginx, caddy-ratelimit, replace-response, Caddy's own server
// options, Envoy), else the nearest valid subdirective when one is close
// enough to be a typo, and lists the valid ones. Every module's parser
// calls Unknown from its default case, so they all read alike.
package suggest

import (
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Unknown returns the error, at the dispenser's line, for name: an
// unknown subdirective of module (the directive, as in `client_ip`,
// `throttle`, `br`) in the block named by where ("" for the directive's
// own block, or e.g. `zone "api"`, `store redis`), whose valid
// subdirectives are valid.
func Unknown(d *caddyfile.Dispenser, name, module, where string, valid ...string) error {
	return d.Err(Message(module, where, name, valid))
}

// Message is Unknown's text for name.
func Message(module, where, name string, valid []string) string {
	prefix := module + ": "
	if where != "" {
		prefix += where + ": "
	}
	msg := fmt.Sprintf("%sunknown subdirective %q", prefix, name)
	list := strings.Join(valid, ", ")
	if f, ok := foreign[module][name]; ok {
		return fmt.Sprintf("%s: that is %s; in edgekit: %s", msg, f.origin, f.instead)
	}
	if near := Nearest(name, valid); near != "" {
		return fmt.Sprintf("%s: did you mean %s? (valid: %s)", msg, near, list)
	}
	return fmt.Sprintf("%s (valid: %s)", msg, list)
}

// Nearest returns the candidate closest to name by edit distance (a
// transposition counts as one edit, so brust is one from burst), when it
// is close enough to be a typo of it, else "". Ties go to the earlier
// candidate.
func Nearest(name string, candidates []string) string {
	limit := maxDistance(len(name))
	best, bestDist := "", limit+1
	for _, c := range candidates {
		if d := distance(strings.ToLower(name), c, bestDist); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// maxDistance is how many edits a typo of a name this long may have:
// few for short names, where two edits reach almost any other name.
func maxDistance(n int) int {
	switch {
	case n <= 4:
		return 1
	case n <= 10:
		return 2
	default:
		return 3
	}
}

// distance is the optimal-string-alignment distance between a and b
// (insertions, deletions, substitutions and adjacent transpositions), or
// anything >= limit once it is known to reach limit. Names are short
// (subdirectives); inputs longer than 64 bytes are never close.
func distance(a, b string, limit int) int {
	const maxLen = 64
	if len(a) > maxLen || len(b) > maxLen {
		return limit
	}
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	var rows [3][maxLen + 1]int
	prev2, prev, cur := &rows[0], &rows[1], &rows[2]
	for j := 0; j <= len(b); j++ {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			cur[j] = v
			rowMin = min(rowMin, v)
		}
		if rowMin >= limit {
			return limit
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// equivalent is another syntax's name and what edgekit offers instead.
type equivalent struct{ origin, instead string }

// foreign maps, per edgekit directive, names from the syntax operators
// come from to edgekit's way of saying the same. Only unknown names are
// looked up, so a name that is valid somewhere (br's window) is unaffected.
var foreign = map[string]map[string]equivalent{
	"client_ip": {
		"set_real_ip_from":       {"nginx realip syntax", "trusted_proxies <cidr|ip|private_ranges> ... (the edge's addresses)"},
		"real_ip_header":         {"nginx realip syntax", "header <name> ... for a single-value header such as CF-Connecting-IP; X-Forwarded-For is the default (omit header), forwarded reads RFC 7239 Forwarded"},
		"real_ip_recursive":      {"nginx realip syntax", "recursive (skip every address in trusted_proxies, from the right), or hops <n> for a fixed number of proxy layers"},
		"trusted_proxies_strict": {"a Caddy server option", "recursive (skip every address in trusted_proxies, from the right)"},
		"client_ip_headers":      {"a Caddy server option", "header <name> ... (read in order: a later header only when every earlier one is absent)"},
		"xff_num_trusted_hops":   {"Envoy's syntax", "hops <n> (counting the peer)"},
		"xff_trusted_cidrs":      {"Envoy's syntax", "trusted_proxies <cidr> ... with recursive"},
	},
	"throttle": {
		"events":            {"caddy-ratelimit's syntax", "rate <n>/<duration> in a zone (events 100 with window 1m is rate 100/1m)"},
		"window":            {"caddy-ratelimit's syntax", "rate <n>/<duration> in a zone (events 100 with window 1m is rate 100/1m)"},
		"distributed":       {"caddy-ratelimit's syntax", "store redis { address <host:port> } (one budget across Caddy instances)"},
		"limit_req":         {"nginx syntax", "a zone <name> { key ...; rate <n>/<duration>; burst <n> } inside throttle, which applies where the directive is"},
		"limit_req_zone":    {"nginx syntax", "zone <name> { key <template>; rate <n>/<duration> }"},
		"limit_req_status":  {"nginx syntax", "status <code>"},
		"limit_req_dry_run": {"nginx syntax", "mode observe"},
		"nodelay":           {"nginx syntax", "burst <n> in a zone: a burst is always let through at once"},
	},
	"substitute": {
		"re":                {"replace-response syntax", "regex <pattern> <replacement> [once]"},
		"stream":            {"replace-response syntax", "nothing: substitute always streams, holding back at most max_match bytes"},
		"subs_filter":       {"nginx subs_filter syntax", "replace <find> <replacement> (regex <pattern> <replacement> for the r flag; every match is replaced unless once is given)"},
		"subs_filter_types": {"nginx subs_filter syntax", "types <media-type> ..."},
		"sub_filter":        {"nginx sub_filter syntax", "replace <find> <replacement>"},
		"sub_filter_once":   {"nginx sub_filter syntax", "once at the end of a replace or regex rule"},
		"sub_filter_types":  {"nginx sub_filter syntax", "types <media-type> ..."},
	},
	"br": {
		"level":             {"other encoders' name", "quality <0-11>"},
		"brotli_comp_level": {"nginx brotli syntax", "quality <0-11>"},
		"brotli_window":     {"nginx brotli syntax", "window <10-24> (log2 of the window size: 1m is 20)"},
	},
}
