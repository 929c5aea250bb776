package substitute

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/caddy-edgekit/edgekit/substitute/internal/engine"
)

// Header rewriting: the rules of a handler are also applied to the
// response fields it names (Handler.Headers), so that a site served under
// another domain keeps its visitors there: Location, Content-Location,
// Link, Refresh, Set-Cookie's Domain, Content-Security-Policy's host
// sources.
//
// Each field value is a text of its own for the engine (^ and $ anchor at
// its ends, a once rule fires once per value); a field sent several times
// (Set-Cookie) is rewritten value by value, never joined. Field names are
// matched case-insensitively against every key of the header map, so a key
// that is not in canonical form (a Go handler writing the map directly)
// cannot slip past; HTTP/1, HTTP/2 and HTTP/3 clients of reverse_proxy
// canonicalize what the upstream sends anyway.
//
// The work is bounded per response (headerBudget). A value whose rewrite
// cannot be sent (its rewritten form would not be a valid field value, as
// with a control character from a placeholder, or would not fit, or the
// budget is spent) is removed and counted, never sent as the upstream
// wrote it: the rules are protections a caller must not switch off.

const (
	// headerBudget bounds the bytes read and written per response while
	// rewriting fields: browsers refuse responses whose header exceeds
	// 256 KiB, so this is never reached by a response that works anyway.
	headerBudget = 1 << 20
	// maxHeaderValue bounds one rewritten value.
	maxHeaderValue = 64 << 10
)

// unrewritableFields frame or encode the message, or belong to one hop:
// rewriting them would corrupt the response rather than redirect it.
var unrewritableFields = [...]string{"Connection", "Content-Encoding", "Content-Length", "Content-Range",
	"Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// checkHeaderName refuses a field substitute must not or cannot rewrite.
func checkHeaderName(name string) error {
	if !httpguts.ValidHeaderFieldName(name) {
		return fmt.Errorf("substitute: headers: %q is not a header field name (letters, digits and !#$%%&'*+-.^_`|~ only)", name)
	}
	for _, f := range unrewritableFields {
		if strings.EqualFold(name, f) {
			return fmt.Errorf("substitute: headers: %s frames or encodes the response and cannot be rewritten: remove it from headers", http.CanonicalHeaderKey(name))
		}
	}
	return nil
}

// checkHeaderNames checks each name and refuses one named twice.
func checkHeaderNames(names []string) error {
	for i, n := range names {
		if err := checkHeaderName(n); err != nil {
			return err
		}
		for _, m := range names[:i] {
			if strings.EqualFold(n, m) {
				return fmt.Errorf("substitute: headers: %s is named twice (names are case-insensitive): name it once", http.CanonicalHeaderKey(n))
			}
		}
	}
	return nil
}

// checkHeaderRule refuses, when the rules apply to header fields, a
// replacement whose own text holds a byte no field value may hold (CR, LF,
// NUL, other controls): known at start, unlike a placeholder's value.
func checkHeaderRule(i int, r Rule) error {
	if j := invalidFieldByte(r.Replace); j >= 0 {
		return fmt.Errorf("substitute: rule %d: %s %q: replacement holds byte %#02x, which no header field value may hold, and headers applies the rules to header fields: move the rule to a substitute block without headers", i+1, ruleKind(r), r.Find, r.Replace[j])
	}
	return nil
}

func ruleKind(r Rule) string {
	if r.Regex {
		return "regex"
	}
	return "replace"
}

// invalidFieldByte returns the index of the first byte that RFC 9110
// §5.5 forbids in a field value (controls other than HTAB, and DEL), or -1.
func invalidFieldByte(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return i
		}
	}
	return -1
}

// headerNames is the compiled form of Handler.Headers: which map keys name
// a field to rewrite, decided without allocating.
type headerNames struct {
	names []string // as configured
	lens  uint64   // bit n set: some name has length n (names up to 63 bytes)
	long  bool     // some name is longer than 63 bytes
}

func newHeaderNames(names []string) *headerNames {
	if len(names) == 0 {
		return nil
	}
	hn := &headerNames{names: names}
	for _, n := range names {
		if len(n) < 64 {
			hn.lens |= 1 << len(n)
		} else {
			hn.long = true
		}
	}
	return hn
}

// index returns the position in names of the name the map key matches
// (case-insensitively), or -1 when it names no field to rewrite.
func (hn *headerNames) index(key string) int {
	if len(key) < 64 {
		if hn.lens&(1<<len(key)) == 0 {
			return -1
		}
	} else if !hn.long {
		return -1
	}
	for i, n := range hn.names {
		if len(n) == len(key) && strings.EqualFold(n, key) {
			return i
		}
	}
	return -1
}

// headerRewriter holds what one response writer needs to rewrite fields:
// its own engine stream (the body's is left alone) and buffers, kept
// across the responses of a pooled writer.
type headerRewriter struct {
	stream *engine.Stream
	in     []byte
	out    boundedBuffer
	budget int
	keys   []namedKey // the map keys to rewrite, in order

	// saved holds the fields as they were before an informational
	// response (103 Early Hints) was sent, so the final response rewrites
	// the originals once rather than the rewritten values again.
	saved []savedField
}

// namedKey is a map key to rewrite and the position of its name in
// Handler.Headers.
type namedKey struct {
	name int
	key  string
}

type savedField struct {
	key    string
	values []string
}

// rewriteHeaders applies the rules to the named fields of hdr. With save
// set, the original values are kept for restoreHeaders.
func (rw *responseWriter) rewriteHeaders(hdr http.Header, save bool) {
	hn := rw.h.headerNames
	if hn == nil {
		return
	}
	hr := &rw.hdr
	hr.saved = hr.saved[:0]
	hr.budget = headerBudget
	// Which values the budget reaches must not depend on Go's random map
	// order (identical requests, and HEAD and GET, get the same fields):
	// the configured names in order, the keys matching one name in sorted
	// order, the values in order.
	hr.keys = hr.keys[:0]
	for key := range hdr {
		if i := hn.index(key); i >= 0 {
			hr.keys = append(hr.keys, namedKey{i, key})
		}
	}
	if len(hr.keys) > 1 {
		slices.SortFunc(hr.keys, func(a, b namedKey) int {
			return cmp.Or(cmp.Compare(a.name, b.name), strings.Compare(a.key, b.key))
		})
	}
	for i, nk := range hr.keys {
		hr.keys[i] = namedKey{} // not kept alive by the pool
		key := nk.key
		values := hdr[key]
		var changed []string // nil while every value is sent as it came
		for i, v := range values {
			nv, fate := rw.rewriteValue(v)
			if fate == fateUnchanged {
				if changed != nil {
					changed = append(changed, v)
				}
				continue
			}
			if changed == nil {
				changed = make([]string, i, len(values)) // a new slice: the upstream's may be shared
				copy(changed, values)
			}
			if fate == fateRewritten {
				changed = append(changed, nv)
			} // else removed: never sent as the upstream wrote it
		}
		if changed != nil {
			if save {
				hr.saved = append(hr.saved, savedField{key, values})
			}
			if len(changed) == 0 {
				delete(hdr, key)
			} else {
				hdr[key] = changed
			}
		}
	}
}

// restoreHeaders puts back what rewriteHeaders(hdr, true) changed.
func (rw *responseWriter) restoreHeaders(hdr http.Header) {
	for i, f := range rw.hdr.saved {
		hdr[f.key] = f.values
		rw.hdr.saved[i] = savedField{}
	}
	rw.hdr.saved = rw.hdr.saved[:0]
}

// fate is what becomes of one value of a named field.
type fate uint8

const (
	fateUnchanged fate = iota // no rule matched: sent as it came
	fateRewritten             // sent rewritten
	fateRemoved               // removed: its rewrite could not be sent (counted by reason)
)

// rewriteValue returns v rewritten and fateRewritten, fateUnchanged when no
// rule matched, or fateRemoved when the rules could not be applied or
// their result cannot be sent. Removing fails closed: sending the
// upstream's value instead would let a caller whose placeholder spoils
// one rule's output switch off every other rule's rewrite of that value.
func (rw *responseWriter) rewriteValue(v string) (string, fate) {
	hr := &rw.hdr
	if len(v) > maxHeaderValue {
		// No rule can be checked on it: it might hold what they remove.
		metrics.headerTooLong.Inc()
		return "", fateRemoved
	}
	if len(v) > hr.budget {
		metrics.headerOverBudget.Inc()
		hr.budget = 0
		return "", fateRemoved
	}
	hr.budget -= len(v)
	limit := min(maxHeaderValue, hr.budget)
	hr.out.reset(limit)
	if hr.stream == nil {
		hr.stream = rw.h.set.NewStream(&hr.out, rw.vars)
	} else {
		hr.stream.Reset(&hr.out, rw.vars)
	}
	hr.in = append(hr.in[:0], v...)
	_, err := hr.stream.Write(hr.in)
	if err == nil {
		err = hr.stream.Close()
	}
	dropped := hr.stream.Dropped()
	if dropped > 0 {
		metrics.dropped.Add(float64(dropped))
	}
	hr.budget -= len(hr.out.b)
	if err != nil {
		// errFieldTooLong, the only error the buffer returns.
		if limit < maxHeaderValue {
			metrics.headerOverBudget.Inc()
			hr.budget = 0 // what follows is over the budget too (see headerBudget)
		} else {
			metrics.headerTooLong.Inc()
		}
		return "", fateRemoved
	}
	if dropped > 0 {
		// A match could grow past max_match: a rule was not applied, and
		// where the upstream echoes the request into the field the caller
		// chose that, so the value is removed, as any value whose rules
		// could not all be applied.
		metrics.headerTooLong.Inc()
		return "", fateRemoved
	}
	if hr.stream.Matched().Empty() {
		return "", fateUnchanged
	}
	if invalidFieldByte(string(hr.out.b)) >= 0 { // no allocation: the conversion is only read
		metrics.headerInvalid.Inc()
		return "", fateRemoved
	}
	metrics.headerRewritten.Inc()
	// RFC 9110 §5.5 (and RFC 9113 §8.2.1, which lets an HTTP/2 peer treat
	// it as malformed): a field value neither starts nor ends with SP or
	// HTAB, which a replacement or a placeholder may put there.
	return string(bytes.Trim(hr.out.b, " \t")), fateRewritten
}

// errFieldTooLong: the rewritten value would pass maxHeaderValue or the
// response's budget.
var errFieldTooLong = errors.New("substitute: rewritten header field value too long")

// boundedBuffer collects one rewritten value, refusing to grow past max.
type boundedBuffer struct {
	b   []byte
	max int
}

func (bb *boundedBuffer) reset(max int) {
	if cap(bb.b) > maxHeaderValue { // never hold a large value for the pool
		bb.b = nil
	}
	bb.b, bb.max = bb.b[:0], max
}

func (bb *boundedBuffer) Write(p []byte) (int, error) {
	if len(bb.b)+len(p) > bb.max {
		return 0, errFieldTooLong
	}
	bb.b = append(bb.b, p...)
	return len(p), nil
}
