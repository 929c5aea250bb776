package clientip

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
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
	reasonNone         reason = iota
	reasonSecret              // secret header missing or wrong
	reasonUntrustedHop        // a member of the trusted span is not in trusted_proxies
	reasonShortChain          // fewer chain members than hops (+ the client entry)
	reasonInvalid             // garbage, `unknown` or obfuscated where an address is needed
	reasonTooLong             // what had to be parsed exceeds maxChainFields fields or maxChainBytes bytes

	reasonAssertionMissing      // verify: no assertion header
	reasonAssertionMalformed    // verify: not the v1 format, or sent twice
	reasonAssertionUnknownKey   // verify: kid names no configured key
	reasonAssertionBadSignature // verify: the MAC does not match (tampered, or another request's)
	reasonAssertionExpired      // verify: signed more than max_age ago
	reasonAssertionFuture       // verify: signed more than futureSkew ahead of this clock
	numReasons
)

var reasonNames = [numReasons]string{"", "secret", "untrusted_hop", "short_chain", "invalid_address", "too_long",
	"assertion_missing", "assertion_malformed", "assertion_unknown_key", "assertion_bad_signature", "assertion_expired", "assertion_future"}

func (r reason) String() string { return reasonNames[r] }

// resolver is the compiled form of a Handler's configuration.
type resolver struct {
	trusted []netip.Prefix // nil: the span is proven by the secret alone
	hops    int
	source  source // sourceXFF, sourceForwarded or sourceHeader
	header  string // canonical name of the single-value header (sourceHeader)

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

	// list mode: where the client entry starts in X-Forwarded-For
	xffLine, xffOffset int
}

func (res *resolution) viaEdge() bool { return res.source != sourcePeer }

// untrusted: the request should have come through the edge and did not.
func (res *resolution) untrusted() bool { return res.reason != reasonNone }

// resolveRequest is resolve, plus the signed assertion when verify is
// configured (it needs the request line).
func (rs *resolver) resolveRequest(r *http.Request) resolution {
	if rs.verify == nil {
		return rs.resolve(r.RemoteAddr, r.Header)
	}
	peer, peerText, ok := parsePeer(r.RemoteAddr)
	res := resolution{peer: peer, peerText: peerText, client: peer, clientText: peerText}
	if res.reason = rs.checkPeer(peer, ok, r.Header); res.reason != reasonNone {
		return res
	}
	addr, text, why := rs.verify.verify(r.Header[rs.verify.header], r)
	if why != reasonNone {
		res.reason = why
		return res
	}
	res.client, res.clientText, res.source = addr, text, sourceSigned
	return res
}

// checkPeer judges what proves the edge besides the chain: the peer's
// address and the shared secret.
func (rs *resolver) checkPeer(peer netip.Addr, ok bool, header http.Header) reason {
	if !ok {
		return reasonInvalid
	}
	if rs.secretHeader != "" && !rs.secretMatches(header[rs.secretHeader]) {
		return reasonSecret
	}
	if rs.trusted != nil && !rs.isTrusted(peer) {
		return reasonUntrustedHop
	}
	return reasonNone
}

// resolve judges whether a request came through the edge and who the client
// is. It does not allocate.
func (rs *resolver) resolve(remoteAddr string, header http.Header) resolution {
	peer, peerText, ok := parsePeer(remoteAddr)
	res := resolution{peer: peer, peerText: peerText, client: peer, clientText: peerText}
	if rs.direct && ok {
		return res
	}
	if res.reason = rs.checkPeer(peer, ok, header); res.reason != reasonNone {
		return res
	}

	// The span is the peer plus hops-1 chain entries from the headers; list
	// modes also need the entry left of it, the client.
	want := rs.hops - 1
	if rs.source != sourceHeader {
		want = rs.hops
	}
	var chain members
	if want > 0 {
		var tooLong bool
		stop := spanCheck{span: rs.hops - 1, trusted: rs.trusted}
		if rs.source == sourceForwarded {
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
		if rs.trusted != nil && !rs.isTrusted(m.addr) {
			res.reason = reasonUntrustedHop
			return res
		}
	}

	var client member
	if rs.source == sourceHeader {
		values := header[rs.header]
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
	res.source = rs.source
	res.xffLine, res.xffOffset = client.line, client.offset
	return res
}

func (rs *resolver) isTrusted(addr netip.Addr) bool {
	return slices.ContainsFunc(rs.trusted, func(p netip.Prefix) bool { return p.Contains(addr) })
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

// cleanXFF rewrites X-Forwarded-For of a request that came through the edge
// so it starts at the client: list mode keeps the entries from the client
// rightwards (what the edge vouches for) and drops what the caller wrote
// further left; header and Forwarded modes leave just the client.
// reverse_proxy then appends the peer.
func cleanXFF(header http.Header, res *resolution, client string) {
	lines := header["X-Forwarded-For"]
	if res.source == sourceXFF {
		lines = lines[res.xffLine:]
		lines[0] = lines[0][res.xffOffset:]
		header["X-Forwarded-For"] = lines
		return
	}
	if len(lines) == 0 {
		header["X-Forwarded-For"] = []string{client}
		return
	}
	lines[0] = client
	header["X-Forwarded-For"] = lines[:1]
}
