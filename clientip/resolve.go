package clientip

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// source says where the client address came from.
type source uint8

const (
	sourcePeer source = iota // not through the edge: the TCP peer
	sourceXFF
	sourceForwarded
	sourceHeader
	sourceSigned // a verified edge assertion
	numSources
)

var sourceNames = [numSources]string{"peer", "xff", "forwarded", "header", "signed"}

func (s source) String() string { return sourceNames[s] }

// reason says why a request was judged not to have come through the edge.
type reason uint8

const (
	reasonNone            reason = iota
	reasonSecret                 // secret header missing or wrong
	reasonUntrustedHop           // a member of the trusted span is in neither trusted_proxies nor the source's answer
	reasonShortChain             // fewer chain members than hops (+ the client entry)
	reasonInvalid                // garbage, `unknown` or obfuscated where an address is needed
	reasonTooLong                // what had to be parsed exceeds maxChainFields fields or maxChainBytes bytes
	reasonSourceCoversAll        // trusted_proxies_source returned ranges covering every address

	reasonAssertionMissing         // verify: no assertion header
	reasonAssertionMalformed       // verify: not the v1 format, or sent twice
	reasonAssertionUnknownKey      // verify: kid names no configured key
	reasonAssertionBadSignature    // verify: the MAC does not match (tampered, or another request's)
	reasonAssertionExpired         // verify: signed more than max_age ago
	reasonAssertionFuture          // verify: signed more than futureSkew ahead of this clock
	reasonAssertionReplayed        // verify: accepted once already (single use)
	reasonAssertionReplayCacheFull // verify: the record of used assertions is full, so single use cannot be proven
	numReasons
)

var reasonNames = [numReasons]string{"", "secret", "untrusted_hop", "short_chain", "invalid_address", "too_long", "source_covers_everything",
	"assertion_missing", "assertion_malformed", "assertion_unknown_key", "assertion_bad_signature", "assertion_expired", "assertion_future",
	"assertion_replayed", "assertion_replay_cache_full"}

func (r reason) String() string { return reasonNames[r] }

// resolver is the compiled form of a Handler's configuration.
type resolver struct {
	trusted []netip.Prefix // the fixed list; nil when none is configured

	// A dynamic trusted_proxies_source, asked per request; its answer adds
	// to trusted. guard judges its answers. Both nil without one.
	ranges caddyhttp.IPRangeSource
	guard  *rangeGuard

	hops      int  // 0 when recursive
	recursive bool // skip every trusted address instead of counting hops
	source    source
	// sourceHeader: the single-value headers, canonical, in order; the
	// first present is read. xffFallback: none present, read
	// X-Forwarded-For as in list mode.
	headers     []string
	xffFallback bool
	unix        bool // a Unix-socket peer is the first trusted layer

	secretHeader string // canonical name; "" when no secret is configured
	secret       string // expanded value

	verify *verifier // the client comes from a signed assertion, not a chain
	// direct: nothing is in front of this Caddy (a PoP that only signs):
	// the client is the peer, and that is no untrusted request.
	direct bool
}

// resolution is the outcome for one request.
type resolution struct {
	peer       netip.Addr
	peerText   string
	client     netip.Addr
	clientText string
	source     source // sourcePeer when not through the edge
	reason     reason // why not, when source is sourcePeer
	header     string // sourceHeader: the header the client was read from

	// list and Forwarded modes: where the client's entry (element) starts
	// in X-Forwarded-For (Forwarded)
	chainLine, chainOffset int

	// reasonSourceCoversAll: the family the source's answer covered.
	coveredFamily string
}

func (res *resolution) viaEdge() bool { return res.source != sourcePeer }

// untrusted: the request should have come through the edge and did not.
func (res *resolution) untrusted() bool { return res.reason != reasonNone }

// resolveRequest judges whether r came through the edge and who the client
// is. It does not allocate (nor does a dynamic source's answer, unless the
// source allocates).
func (rs *resolver) resolveRequest(r *http.Request) resolution {
	return rs.judge(r.RemoteAddr, r.Header, r)
}

// resolve is resolveRequest for a peer and headers alone (tests and fuzz
// targets): a dynamic source is handed no request, and with verify there is
// no request line to check an assertion against, so none is believed.
func (rs *resolver) resolve(remoteAddr string, header http.Header) resolution {
	return rs.judge(remoteAddr, header, nil)
}

func (rs *resolver) judge(remoteAddr string, header http.Header, r *http.Request) resolution {
	// The listener decides what the peer is: on a Unix socket, RemoteAddr
	// is the peer socket's name, which the peer chose ("10.9.9.9:80"
	// would parse as an address).
	unixPeer := onUnixSocket(r)
	peer, peerText, ok := netip.Addr{}, unixPeerText, false
	if !unixPeer {
		peer, peerText, ok = parsePeer(remoteAddr)
	}
	res := resolution{peer: peer, peerText: peerText, client: peer, clientText: peerText}
	if rs.direct && ok {
		return res
	}
	switch {
	case unixPeer && !rs.unix:
		res.reason = reasonUntrustedHop // a local process, but not the edge unless trusted_proxies_unix says so
		return res
	case !ok && !unixPeer:
		res.reason = reasonInvalid
		return res
	}
	// trusted_proxies_unix is one more member of the trusted set: with it,
	// the span is checked too.
	trust := trustSet{fixed: rs.trusted, check: rs.trusted != nil || rs.ranges != nil || rs.unix}
	if rs.ranges != nil {
		// Asked only once the peer is read, as the interface asks.
		trust.dynamic = rs.ranges.GetIPRanges(r)
		if family := rs.guard.coversEverything(trust.dynamic); family != "" {
			res.reason = reasonSourceCoversAll
			res.coveredFamily = family
			return res
		}
	}
	if !unixPeer && trust.check && !trust.contains(peer) {
		res.reason = reasonUntrustedHop
		return res
	}
	// The secret only after the peer: a stranger's reason must not say
	// whether its guess of the secret was right.
	if rs.secretHeader != "" && !rs.secretMatches(header[rs.secretHeader]) {
		res.reason = reasonSecret
		return res
	}

	if rs.verify != nil {
		if r == nil {
			res.reason = reasonAssertionMissing
			return res
		}
		addr, text, why := rs.verify.verify(header[rs.verify.header], r)
		if why != reasonNone {
			res.reason = why
			return res
		}
		res.client, res.clientText, res.source = addr, text, sourceSigned
		return res
	}

	// Header mode reads the first of its headers present; with none, the
	// X-Forwarded-For fallback is list mode. A later header is never read
	// because an earlier one is invalid: the caller would pick.
	src := rs.source
	var values []string
	if src == sourceHeader {
		for _, name := range rs.headers {
			if values = header[name]; len(values) > 0 {
				res.header = name
				break
			}
		}
		if res.header == "" && rs.xffFallback {
			src = sourceXFF
		}
	}
	if rs.recursive {
		return rs.resolveRecursive(res, header, src, trust)
	}

	// The span is the peer plus hops-1 chain entries from the headers; list
	// modes also need the entry left of it, the client.
	want := rs.hops - 1
	if src != sourceHeader {
		want = rs.hops
	}
	var chain members
	if want > 0 {
		var tooLong bool
		stop := spanCheck{span: rs.hops - 1, trust: trust}
		if src == sourceForwarded {
			tooLong = lastForwarded(header["Forwarded"], want, stop, &chain)
		} else {
			tooLong = lastXFF(header["X-Forwarded-For"], want, stop, &chain)
		}
		if tooLong {
			res.reason = reasonTooLong
			return res
		}
	}
	for i := 0; i < rs.hops-1; i++ {
		if i >= chain.n {
			res.reason = reasonShortChain
			return res
		}
		m := &chain.m[i]
		if !m.valid {
			res.reason = reasonInvalid
			return res
		}
		if trust.check && !trust.contains(m.addr) {
			res.reason = reasonUntrustedHop
			return res
		}
	}

	var client member
	if src == sourceHeader {
		if len(values) != 1 { // missing, or sent twice: no single answer
			res.reason = reasonInvalid
			return res
		}
		client.addr, client.text, client.valid = parseNode(strings.Trim(values[0], " \t")) // RFC 9110 OWS
	} else {
		if rs.hops-1 >= chain.n {
			res.reason = reasonShortChain
			return res
		}
		client = chain.m[rs.hops-1]
	}
	if !client.valid {
		res.reason = reasonInvalid
		return res
	}
	res.client, res.clientText = client.addr, client.text
	res.source = src
	res.chainLine, res.chainOffset = client.line, client.offset
	return res
}

// resolveRecursive reads the chain from the right, skipping every trusted
// member, up to maxHops trusted layers with the peer (already checked); the
// first member outside the ranges is the client. The reasons are those of
// hops: an invalid member before the client, invalid_address; the chain
// ends with every member trusted, short_chain; more trusted layers than
// hops can count, too_long.
func (rs *resolver) resolveRecursive(res resolution, header http.Header, src source, trust trustSet) resolution {
	var chain members
	stop := spanCheck{trust: trust, recursive: true}
	var tooLong bool
	if src == sourceForwarded {
		tooLong = lastForwarded(header["Forwarded"], maxHops, stop, &chain)
	} else {
		tooLong = lastXFF(header["X-Forwarded-For"], maxHops, stop, &chain)
	}
	switch {
	case tooLong:
		res.reason = reasonTooLong
	case chain.n == 0:
		res.reason = reasonShortChain
	case !chain.m[chain.n-1].valid:
		res.reason = reasonInvalid
	case !chain.client && chain.n == maxHops:
		res.reason = reasonTooLong
	case !chain.client:
		res.reason = reasonShortChain
	default:
		client := &chain.m[chain.n-1]
		res.client, res.clientText = client.addr, client.text
		res.source = src
		res.chainLine, res.chainOffset = client.line, client.offset
	}
	return res
}

// unixPeerText is a Unix-socket peer's text, as Go and Caddy write an
// unnamed one.
const unixPeerText = "@"

// onUnixSocket reports whether r came in on a Unix socket, by its
// listener's network (RemoteAddr is only "@" for an unnamed peer).
func onUnixSocket(r *http.Request) bool {
	if r == nil {
		return false
	}
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && addr != nil && strings.HasPrefix(addr.Network(), "unix")
}

// trustSet is what the members of one request's trusted span are checked
// against: the fixed list and what a dynamic source returned for the
// request.
type trustSet struct {
	fixed   []netip.Prefix
	dynamic []netip.Prefix
	check   bool // false: the span is proven by the secret alone
}

func (t trustSet) contains(addr netip.Addr) bool {
	return inPrefixes(t.fixed, addr) || inSourcePrefixes(t.dynamic, addr)
}

// secretMatches compares in time that depends only on the secret's length
// (never on where the first difference is, nor on the secret's length being
// guessed right). Exactly one header line must be sent.
func (rs *resolver) secretMatches(values []string) bool {
	if len(values) != 1 {
		return false
	}
	got, want := values[0], rs.secret
	var diff byte
	if len(got) != len(want) {
		diff = 1
	}
	for i := 0; i < len(want); i++ {
		var c byte
		if i < len(got) {
			c = got[i]
		}
		diff |= c ^ want[i]
	}
	return diff == 0
}

// rewriteChain rewrites the chain headers of a request that came through
// the edge so that they start at the client. List mode keeps X-Forwarded-For
// from the client's entry rightwards (what the edge vouches for) and drops
// what the caller wrote further left; Forwarded mode does the same to
// Forwarded, from the client's element, and makes X-Forwarded-For just the
// client; header mode (and a signed assertion) makes X-Forwarded-For just
// the client, and header mode writes the client into its header too.
// reverse_proxy then appends the peer to X-Forwarded-For. The rewrites reuse
// the request's own slices: only an X-Forwarded-For that was not there is
// allocated.
func rewriteChain(header http.Header, res *resolution, client string) {
	switch res.source {
	case sourceXFF:
		trimLines(header, "X-Forwarded-For", res.chainLine, res.chainOffset)
		return
	case sourceForwarded:
		trimLines(header, "Forwarded", res.chainLine, res.chainOffset)
	case sourceHeader:
		header[res.header][0] = client // exactly one line: judge checked
	}
	lines := header["X-Forwarded-For"]
	if len(lines) == 0 {
		header["X-Forwarded-For"] = []string{client}
		return
	}
	lines[0] = client
	header["X-Forwarded-For"] = lines[:1]
}

// trimLines drops the lines of header name before line, and the bytes of
// that line before offset.
func trimLines(header http.Header, name string, line, offset int) {
	lines := header[name][line:]
	lines[0] = lines[0][offset:]
	header[name] = lines
}
