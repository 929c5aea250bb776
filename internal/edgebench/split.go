package edgebench

import (
	"strings"
	"time"
)

// PoPTiming is what a PoP's Server-Timing entries (edgekit's server_timing
// handler, docs/server-timing.md) say about one request:
//
//   - edge: time in the PoP, the upstream round trips excluded;
//   - origin: the upstream's time to first byte, from the request written to
//     the upstream to its first response byte;
//   - origin-conn (desc reused or new), and for a new connection
//     origin-dial and origin-tls: how long opening it took (not part of edge
//     or origin);
//   - client (desc "<proto> tls=<mode>"): the client connection as the PoP
//     saw it;
//   - rtt: the client connection's RTT as the PoP measures it.
//
// A name given more than once counts by its last entry: a PoP appends its
// entries after those its upstream sent (another PoP's, or an origin's
// own), so the last is the one nearest the client. Every string field is
// one of a few constants, never text from the response.
type PoPTiming struct {
	Edge, Origin, OriginDial, OriginTLS, RTT time.Duration
	HasEdge, HasOrigin, HasRTT               bool
	// OriginConn is "reused", "new", "other" (an unknown desc) or empty
	// (no origin-conn entry).
	OriginConn string `json:",omitempty"`
	// ClientProto is h1, h2, h3, "other" or empty; ClientTLS none, new,
	// resumed, 0rtt, "other" or empty: the client entry's desc.
	ClientProto string `json:",omitempty"`
	ClientTLS   string `json:",omitempty"`
}

// The origin-conn and TLS-mode values a PoPTiming and a Sample hold.
const (
	ConnReused = "reused"
	ConnNew    = "new"
	TLSNone    = "none" // cleartext
	TLSNew     = "new"
	TLSResumed = "resumed"
	TLS0RTT    = "0rtt"
	// DescOther stands for a desc edgebench does not know.
	DescOther = "other"
)

// The Server-Timing names the split reads.
const (
	stEdge       = "edge"
	stOrigin     = "origin"
	stOriginConn = "origin-conn"
	stOriginDial = "origin-dial"
	stOriginTLS  = "origin-tls"
	stClient     = "client"
	stRTT        = "rtt"
)

// hasSplit says whether the response carried the entries the split needs:
// edge or origin (a response the PoP made itself has no origin).
func (p *PoPTiming) hasSplit() bool { return p != nil && (p.HasEdge || p.HasOrigin) }

// add records one metric if the split reads its name, and reports whether
// it did.
func (p *PoPTiming) add(m ServerTimingMetric) bool {
	switch popName(m.Name) {
	case stEdge:
		p.Edge, p.HasEdge = durOrZero(m)
		return true
	case stOrigin:
		p.Origin, p.HasOrigin = durOrZero(m)
		return true
	case stOriginDial:
		p.OriginDial, _ = durOrZero(m)
		return true
	case stOriginTLS:
		p.OriginTLS, _ = durOrZero(m)
		return true
	case stRTT:
		p.RTT, p.HasRTT = durOrZero(m)
		return true
	case stOriginConn:
		p.OriginConn = oneOf(strings.TrimSpace(m.Desc), ConnReused, ConnNew)
		return true
	case stClient:
		p.ClientProto, p.ClientTLS = clientDesc(m.Desc)
		return true
	}
	return false
}

// durOrZero is a metric's dur (the parser bounds it to 0..maxServerTiming);
// an entry without a valid dur counts as absent.
func durOrZero(m ServerTimingMetric) (time.Duration, bool) {
	if !m.HasDur {
		return 0, false
	}
	return min(max(m.Dur, 0), maxServerTiming), true
}

// oneOf returns the constant among known that equals s (case-insensitive),
// DescOther for any other text, "" for none.
func oneOf(s string, known ...string) string {
	if s == "" {
		return ""
	}
	for _, k := range known {
		if strings.EqualFold(s, k) {
			return k
		}
	}
	return DescOther
}

// clientDesc reads the client entry's desc, "h3 tls=0rtt": the words in any
// order, so a desc with more words still reads.
func clientDesc(desc string) (proto, mode string) {
	for _, word := range strings.Fields(desc) {
		if v, ok := strings.CutPrefix(strings.ToLower(word), "tls="); ok {
			if mode == "" {
				mode = oneOf(v, TLSNone, TLSNew, TLSResumed, TLS0RTT)
			}
			continue
		}
		if p := oneOf(word, string(H1), string(H2), string(H3)); p != DescOther && proto == "" {
			proto = p
		}
	}
	if desc != "" && proto == "" {
		proto = DescOther
	}
	if desc != "" && mode == "" {
		mode = DescOther
	}
	return proto, mode
}

// requestSplit is one response's time to first byte split by who spent it.
// Every part is between 0 and the TTFB's bound; LastMile is what is left of
// the client's TTFB once the PoP's parts are taken out.
type requestSplit struct {
	LastMile, Edge, OriginConnect, Origin time.Duration
	// Overrun says the PoP reported more than the client measured (its
	// clock and the client's disagree, or it lies): LastMile is then 0.
	Overrun bool
}

// splitTTFB splits a response's TTFB by its PoP entries; false when the
// response carried neither edge nor origin. A new origin connection's dial
// and TLS are their own part: the PoP counts them in neither edge nor
// origin.
func splitTTFB(ttfb time.Duration, p *PoPTiming) (requestSplit, bool) {
	if !p.hasSplit() {
		return requestSplit{}, false
	}
	clamp := func(d time.Duration) time.Duration { return min(max(d, 0), maxServerTiming) }
	s := requestSplit{Edge: clamp(p.Edge), OriginConnect: clamp(p.OriginDial) + clamp(p.OriginTLS), Origin: clamp(p.Origin)}
	ttfb = max(ttfb, 0)
	// Each part is at most 1e15 ns: the sum cannot overflow.
	if reported := s.Edge + s.OriginConnect + s.Origin; reported > ttfb {
		s.Overrun = true
	} else {
		s.LastMile = ttfb - reported
	}
	return s, true
}

// clientTLSMode is the TLS mode the client itself saw for a request:
// cleartext, or what its connection's handshake did.
func clientTLSMode(https, resumed, used0RTT bool) string {
	switch {
	case !https:
		return TLSNone
	case used0RTT:
		return TLS0RTT
	case resumed:
		return TLSResumed
	}
	return TLSNew
}

// protoWord is h1, h2 or h3 for a response's Proto ("HTTP/2.0").
func protoWord(proto string) string {
	switch {
	case strings.HasPrefix(proto, "HTTP/1."):
		return string(H1)
	case strings.HasPrefix(proto, "HTTP/2"):
		return string(H2)
	case strings.HasPrefix(proto, "HTTP/3"):
		return string(H3)
	}
	return ""
}

// SplitStats is one outcome's time to first byte split by where it went,
// from the PoP's Server-Timing entries. The parts are per response, and
// each figure is that part's percentile over the responses with a split,
// so the medians of the parts need not add up to the median TTFB (TTFB is
// the same responses' own median, to compare).
type SplitStats struct {
	// Responses carried edge or origin; NoServerTiming carried neither (no
	// split: a target without server_timing, or a response it did not
	// time).
	Responses, NoServerTiming int
	// TTFB is the client's time to first byte of the Responses. LastMile
	// is TTFB less what the PoP reports (Edge + OriginConnect + Origin):
	// the phone's link, its handshakes and the client itself. Edge is the
	// PoP's own time, Origin the upstream's time to first byte,
	// OriginConnect the dial and TLS of a new upstream connection (0 on a
	// reused one).
	TTFB, LastMile, Edge, OriginConnect, Origin Stats
	// Overrun counts responses whose PoP reported more than the TTFB the
	// client measured: their last mile is counted as 0.
	Overrun int
	// OriginReused and OriginNew count origin-conn entries; OriginDial and
	// OriginTLS are over the new connections.
	OriginReused, OriginNew int
	OriginDial, OriginTLS   Stats
	// RTT is the client connection's RTT as the PoP reported it, over
	// RTTCount responses.
	RTT      Stats
	RTTCount int
	// PoPTLS counts responses by the TLS mode the PoP saw (none, new,
	// resumed, 0rtt, other); TLSDisagree those where it differs from what
	// the client saw (Sample.TLSMode), ProtoDisagree those where the
	// client entry's protocol differs from the one spoken.
	PoPTLS                     map[string]int `json:",omitempty"`
	TLSDisagree, ProtoDisagree int
}

// splitHists aggregates one outcome's splits in histograms: bounded memory
// at any number of responses, mergeable across load workers.
type splitHists struct {
	responses, noTiming, overrun          int
	ttfb, lastMile, edge, connect, origin Histogram
	reused, new                           int
	dial, tls, rtt                        Histogram
	popTLS                                map[string]int // keys: the TLS* constants and DescOther only
	tlsDisagree, protoDisagree            int
}

func (h *splitHists) add(s Sample) {
	p := s.PoP
	split, ok := splitTTFB(s.TTFB, p)
	if !ok {
		h.noTiming++
		return
	}
	h.responses++
	if split.Overrun {
		h.overrun++
	}
	h.ttfb.Record(max(s.TTFB, 0))
	h.lastMile.Record(split.LastMile)
	h.edge.Record(split.Edge)
	h.connect.Record(split.OriginConnect)
	h.origin.Record(split.Origin)
	switch p.OriginConn {
	case ConnReused:
		h.reused++
	case ConnNew:
		h.new++
		h.dial.Record(p.OriginDial)
		h.tls.Record(p.OriginTLS)
	}
	if p.HasRTT {
		h.rtt.Record(p.RTT)
	}
	if p.ClientTLS != "" {
		if h.popTLS == nil {
			h.popTLS = map[string]int{}
		}
		h.popTLS[p.ClientTLS]++
		if s.TLSMode != "" && p.ClientTLS != s.TLSMode {
			h.tlsDisagree++
		}
	}
	if spoken := protoWord(s.Proto); p.ClientProto != "" && spoken != "" && p.ClientProto != spoken {
		h.protoDisagree++
	}
}

func (h *splitHists) merge(o *splitHists) {
	h.responses += o.responses
	h.noTiming += o.noTiming
	h.overrun += o.overrun
	for _, pair := range [][2]*Histogram{
		{&h.ttfb, &o.ttfb}, {&h.lastMile, &o.lastMile}, {&h.edge, &o.edge}, {&h.connect, &o.connect},
		{&h.origin, &o.origin}, {&h.dial, &o.dial}, {&h.tls, &o.tls}, {&h.rtt, &o.rtt},
	} {
		pair[0].Merge(pair[1])
	}
	h.reused += o.reused
	h.new += o.new
	for k, n := range o.popTLS {
		if h.popTLS == nil {
			h.popTLS = map[string]int{}
		}
		h.popTLS[k] += n
	}
	h.tlsDisagree += o.tlsDisagree
	h.protoDisagree += o.protoDisagree
}

func (h *splitHists) stats() *SplitStats {
	s := &SplitStats{
		Responses: h.responses, NoServerTiming: h.noTiming, Overrun: h.overrun,
		TTFB: histogramStats(&h.ttfb), LastMile: histogramStats(&h.lastMile), Edge: histogramStats(&h.edge),
		OriginConnect: histogramStats(&h.connect), Origin: histogramStats(&h.origin),
		OriginReused: h.reused, OriginNew: h.new,
		OriginDial: histogramStats(&h.dial), OriginTLS: histogramStats(&h.tls),
		RTT: histogramStats(&h.rtt), RTTCount: int(h.rtt.Count()),
		TLSDisagree: h.tlsDisagree, ProtoDisagree: h.protoDisagree,
	}
	if len(h.popTLS) > 0 {
		s.PoPTLS = make(map[string]int, len(h.popTLS))
		for k, n := range h.popTLS {
			s.PoPTLS[k] = n
		}
	}
	return s
}
