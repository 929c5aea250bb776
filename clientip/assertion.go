package clientip

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"hash"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Signed edge assertions: the PoP's client_ip writes what it resolved into
// one header,
//
//	v1 ip=203.0.113.7 t=1764590000 kid=k2 sig=<43 base64url characters>
//
// where sig is HMAC-SHA256, keyed by the key named kid, over
//
//	"edgekit-assertion-v1\n" ip "\n" t "\n" kid "\n" method "\n" host "\n" target
//
// (target: the escaped path, plus "?" and the raw query when there is one,
// as reverse_proxy sends them upstream). The origin's client_ip recomputes it
// and believes ip only if it matches and t is recent. Covering the method,
// host and target ties an assertion to its request: a captured header is
// worth nothing on another path or with another query string, and nothing at
// all once max_age has passed. The body is not covered.
//
// The format is strict (fixed field order, single spaces, canonical address,
// no padding) so that exactly one text stands for each assertion.

const (
	defaultAssertionHeader = "X-Edge-Assertion"
	assertionPrefix        = "v1 ip="
	assertionContext       = "edgekit-assertion-v1\n"

	minKeyBytes  = 32 // HMAC-SHA256's own output size: shorter keys are guessable sooner than the MAC
	maxKeyIDLen  = 32
	maxTimeChars = 12 // unix seconds; 12 digits last until the year 33658
	sigChars     = 43 // base64url of 32 bytes, unpadded
	maxIPChars   = 39 // the longest canonical IPv6 text

	defaultMaxAge = 30 * time.Second
	minMaxAge     = 2 * time.Second // t has 1 s resolution: 1 s would refuse assertions a few ms old
	maxMaxAge     = 5 * time.Minute
	// futureSkew is how far ahead of the origin's clock a PoP's clock may
	// run; beyond it an assertion is refused as from the future.
	futureSkew = 5 * time.Second
)

// macEqual compares two signatures in constant time. A variable so that a
// test can check the verify path goes through it.
var macEqual = subtle.ConstantTimeCompare

// assertion is a parsed header; every field is a substring of it.
type assertion struct {
	ip   string
	addr netip.Addr
	t    string
	unix int64
	kid  string
	sig  string
}

// parseAssertion reads a header value in the v1 format. It does not allocate
// on well-formed input.
func parseAssertion(s string) (a assertion, ok bool) {
	rest, ok := strings.CutPrefix(s, assertionPrefix)
	if !ok {
		return a, false
	}
	if a.ip, rest, ok = strings.Cut(rest, " t="); !ok {
		return a, false
	}
	if a.t, rest, ok = strings.Cut(rest, " kid="); !ok {
		return a, false
	}
	if a.kid, a.sig, ok = strings.Cut(rest, " sig="); !ok {
		return a, false
	}
	if a.addr, ok = canonicalAddr(a.ip); !ok {
		return a, false
	}
	if a.unix, ok = parseUnix(a.t); !ok {
		return a, false
	}
	if !validKeyID(a.kid) || !validSig(a.sig) {
		return a, false
	}
	return a, true
}

// canonicalAddr parses an address written the one way netip writes it, with
// no zone and not IPv4-mapped.
func canonicalAddr(s string) (netip.Addr, bool) {
	if len(s) == 0 || len(s) > maxIPChars {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(s)
	if err != nil || addr.Zone() != "" || addr.Is4In6() {
		return netip.Addr{}, false
	}
	var buf [maxIPChars]byte
	if string(addr.AppendTo(buf[:0])) != s {
		return netip.Addr{}, false
	}
	return addr, true
}

// parseUnix reads decimal seconds without leading zeros.
func parseUnix(s string) (int64, bool) {
	if len(s) == 0 || len(s) > maxTimeChars || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// validKeyID: 1..32 of A-Z a-z 0-9 . _ -, so an id can never hold the
// format's separators.
func validKeyID(id string) bool {
	if len(id) == 0 || len(id) > maxKeyIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func validSig(sig string) bool {
	if len(sig) != sigChars {
		return false
	}
	for i := 0; i < len(sig); i++ {
		c := sig[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// assertionKey is one key by id, with a pool of keyed MAC states: hmac.New
// per request would allocate and rehash the key each time.
type assertionKey struct {
	id   string
	pool sync.Pool // *macState
}

type macState struct {
	mac hash.Hash
	msg []byte
	sum [sha256.Size]byte
	sig [sigChars]byte // computed, base64url
	got [sigChars]byte // received
	out []byte         // a header value being built
}

func newAssertionKey(id string, secret []byte) *assertionKey {
	k := &assertionKey{id: id}
	k.pool.New = func() any {
		return &macState{mac: hmac.New(sha256.New, secret), msg: make([]byte, 0, 256)}
	}
	return k
}

// compute writes the signature of the fields and the request into st.sig.
func (k *assertionKey) compute(st *macState, ip, t string, r *http.Request) {
	m := append(st.msg[:0], assertionContext...)
	m = append(m, ip...)
	m = append(m, '\n')
	m = append(m, t...)
	m = append(m, '\n')
	m = append(m, k.id...)
	m = append(m, '\n')
	m = append(m, r.Method...)
	m = append(m, '\n')
	m = append(m, r.Host...)
	m = append(m, '\n')
	m = appendTarget(m, r)
	st.msg = m
	st.mac.Reset()
	st.mac.Write(m)
	base64.RawURLEncoding.Encode(st.sig[:], st.mac.Sum(st.sum[:0]))
}

// appendTarget appends the request target as reverse_proxy writes it
// upstream, from the same URL fields, so the PoP and the origin compute it
// alike.
func appendTarget(b []byte, r *http.Request) []byte {
	b = append(b, r.URL.EscapedPath()...)
	if r.URL.ForceQuery || r.URL.RawQuery != "" {
		b = append(b, '?')
		b = append(b, r.URL.RawQuery...)
	}
	return b
}

// signer writes assertions at the PoP.
type signer struct {
	header string // canonical
	key    *assertionKey
	now    func() time.Time
}

// sign returns the header value asserting client for r.
func (s *signer) sign(client string, r *http.Request) string {
	st := s.key.pool.Get().(*macState)
	defer s.key.pool.Put(st)
	var tbuf [20]byte
	t := appendUnix(tbuf[:0], s.now().Unix())
	s.key.compute(st, client, string(t), r)
	out := append(st.out[:0], assertionPrefix...)
	out = append(out, client...)
	out = append(out, " t="...)
	out = append(out, t...)
	out = append(out, " kid="...)
	out = append(out, s.key.id...)
	out = append(out, " sig="...)
	out = append(out, st.sig[:]...)
	st.out = out
	return string(out)
}

// appendUnix appends n in decimal; a clock before 1970 gives "0", an
// assertion that is only ever expired.
func appendUnix(b []byte, n int64) []byte {
	return strconv.AppendInt(b, max(n, 0), 10)
}

// verifier checks assertions at the origin.
type verifier struct {
	header string // canonical
	keys   []*assertionKey
	maxAge time.Duration
	now    func() time.Time
	used   *replayCache // each assertion is accepted once
}

// verify judges the assertion header lines of r. On success it returns the
// signed address and its text.
func (v *verifier) verify(values []string, r *http.Request) (netip.Addr, string, reason) {
	if len(values) == 0 {
		return netip.Addr{}, "", reasonAssertionMissing
	}
	if len(values) != 1 {
		return netip.Addr{}, "", reasonAssertionMalformed
	}
	a, ok := parseAssertion(values[0])
	if !ok {
		return netip.Addr{}, "", reasonAssertionMalformed
	}
	var key *assertionKey
	for _, k := range v.keys {
		if k.id == a.kid {
			key = k
			break
		}
	}
	if key == nil {
		return netip.Addr{}, "", reasonAssertionUnknownKey
	}
	st := key.pool.Get().(*macState)
	key.compute(st, a.ip, a.t, r)
	copy(st.got[:], a.sig)
	match := macEqual(st.sig[:], st.got[:]) == 1
	mac := keyOf(st.sum[:])
	key.pool.Put(st)
	if !match {
		return netip.Addr{}, "", reasonAssertionBadSignature
	}
	// The MAC is checked first, so that expired counts only genuine
	// assertions (a replay, or a slow clock), never tampered ones.
	// t is truncated to the second, so now - t over-estimates the age by
	// under a second: an assertion is never accepted after max_age.
	signed := time.Unix(a.unix, 0)
	now := v.now()
	if now.Sub(signed) > v.maxAge {
		return netip.Addr{}, "", reasonAssertionExpired
	}
	if signed.Sub(now) > futureSkew {
		return netip.Addr{}, "", reasonAssertionFuture
	}
	// Last, so that only a genuine assertion within its window takes room.
	if why := v.used.use(mac, a.unix, oldestAccepted(now, v.maxAge)); why != reasonNone {
		return netip.Addr{}, "", why
	}
	return a.addr, a.ip, reasonNone
}
