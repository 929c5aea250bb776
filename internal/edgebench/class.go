package edgebench

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Class is the kind of connection a request is measured on. Every class
// opens a fresh connection per request; they differ in what the client
// brings to the handshake.
type Class string

// The connection classes.
const (
	// ClassNew: a full handshake with no session ticket, a first visit.
	ClassNew Class = "new"
	// ClassResumed: a TLS 1.3 session ticket from an earlier connection
	// (TLS over h1/h2, QUIC's TLS over h3): no certificate is sent or
	// verified, but the handshake's round trips are the same.
	ClassResumed Class = "resumed"
	// Class0RTT: h3 only. The request rides in the first flight as
	// early data on a resumed QUIC connection. Go's crypto/tls has no
	// client 0-RTT over TCP, so h1/h2 cannot ask for it.
	Class0RTT Class = "0rtt"
)

// Outcomes that differ from the class asked for. A request is counted
// under what really happened, never silently under the class it asked for.
const (
	// OutcomeNotResumed: resumed or 0rtt was asked, the server did a full
	// handshake (no ticket, or it refused the ticket).
	OutcomeNotResumed = "not resumed"
	// Outcome0RTTRefused: 0rtt was asked and the session resumed, but the
	// server did not accept early data (the request waited for the
	// handshake).
	Outcome0RTTRefused = "0rtt refused"
	// OutcomeUnexpectedResume: new was asked but the session resumed.
	OutcomeUnexpectedResume = "new but resumed"
)

func (c Class) validate(p Proto, https bool) error {
	switch c {
	case ClassNew, ClassResumed, Class0RTT:
	default:
		return fmt.Errorf("edgebench: class %q: must be new, resumed or 0rtt", string(c))
	}
	if c != ClassNew && !https {
		return fmt.Errorf("edgebench: class %s needs an https:// URL (session tickets are TLS)", c)
	}
	if c == Class0RTT && p != H3 {
		return fmt.Errorf("edgebench: class 0rtt over %s: unsupported, Go's crypto/tls has no client 0-RTT (early data) over TCP; use -proto h3", p)
	}
	return nil
}

// outcome names what a request on a connection of class c turned out to be.
func outcome(c Class, resumed, used0RTT bool) string {
	switch {
	case c == ClassNew && resumed:
		return OutcomeUnexpectedResume
	case c == ClassNew:
		return string(ClassNew)
	case !resumed:
		return OutcomeNotResumed
	case c == Class0RTT && !used0RTT:
		return Outcome0RTTRefused
	}
	return string(c)
}

// ClassWeight is one class of a mix and its share.
type ClassWeight struct {
	Class  Class
	Weight int
}

// Mix is the classes a run's requests are spread over, by weight.
type Mix []ClassWeight

// ParseMix parses "new=20,resumed=70,0rtt=10" (weights are relative, any
// positive integers) or a plain list "new,resumed" (equal weights).
func ParseMix(s string) (Mix, error) {
	var m Mix
	for _, field := range strings.Split(s, ",") {
		name, weight, hasWeight := strings.Cut(strings.TrimSpace(field), "=")
		w := 1
		if hasWeight {
			var err error
			if w, err = strconv.Atoi(strings.TrimSpace(weight)); err != nil || w < 1 || w > 1_000_000 {
				return nil, fmt.Errorf("edgebench: mix %q: weight %q of %s must be an integer 1..1000000", s, weight, name)
			}
		}
		c := Class(strings.TrimSpace(name))
		if err := c.validate(H3, true); err != nil {
			return nil, fmt.Errorf("edgebench: mix %q: %w", s, err)
		}
		if slices.ContainsFunc(m, func(cw ClassWeight) bool { return cw.Class == c }) {
			return nil, fmt.Errorf("edgebench: mix %q: class %s given twice", s, c)
		}
		m = append(m, ClassWeight{c, w})
	}
	return m, nil
}

// Validate refuses a class the protocol cannot carry (0rtt over h1/h2,
// resumption without TLS), with the reason.
func (m Mix) Validate(p Proto, https bool) error {
	for _, cw := range m {
		if err := cw.Class.validate(p, https); err != nil {
			return err
		}
		if cw.Weight < 1 {
			return fmt.Errorf("edgebench: class %s: weight %d must be positive", cw.Class, cw.Weight)
		}
	}
	return nil
}

func (m Mix) String() string {
	var parts []string
	for _, cw := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", cw.Class, cw.Weight))
	}
	return strings.Join(parts, ",")
}

// needsTicket says whether any class of the mix resumes a session.
func (m Mix) needsTicket() bool {
	return slices.ContainsFunc(m, func(cw ClassWeight) bool { return cw.Class != ClassNew })
}

// mixPicker deals classes in proportion to their weights, smoothly
// (nginx's smooth weighted round robin): new=1,resumed=3 gives
// resumed, resumed, new, resumed, ... so any stretch of a run carries the
// mix, not blocks of one class. It is deterministic, so runs repeat.
type mixPicker struct {
	mu      sync.Mutex
	mix     Mix
	current []int
	total   int
}

func newMixPicker(m Mix) *mixPicker {
	p := &mixPicker{mix: m, current: make([]int, len(m))}
	for _, cw := range m {
		p.total += cw.Weight
	}
	return p
}

func (p *mixPicker) next() Class {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := 0
	for i, cw := range p.mix {
		p.current[i] += cw.Weight
		if p.current[i] > p.current[best] {
			best = i
		}
	}
	p.current[best] -= p.total
	return p.mix[best].Class
}

// ticketCache is the session cache shared by the fresh connections of one
// resuming class, so each finds the ticket an earlier one got.
// It counts stored tickets so a run can wait for its first.
type ticketCache struct {
	tls.ClientSessionCache
	mu     sync.Mutex
	stored int
	got    chan struct{} // closed on the first Put of a session
}

func newTicketCache() *ticketCache {
	return &ticketCache{ClientSessionCache: tls.NewLRUClientSessionCache(64), got: make(chan struct{})}
}

// Get returns a copy of the cached session: concurrent connections
// resuming from one ticket must not share its SessionState, which quic-go
// writes to (EarlyData) while it resumes.
func (c *ticketCache) Get(key string) (*tls.ClientSessionState, bool) {
	cs, ok := c.ClientSessionCache.Get(key)
	if !ok || cs == nil {
		return cs, ok
	}
	ticket, state, err := cs.ResumptionState()
	if err != nil || state == nil {
		return nil, false
	}
	encoded, err := state.Bytes()
	if err != nil {
		return nil, false
	}
	copied, err := tls.ParseSessionState(encoded)
	if err != nil {
		return nil, false
	}
	copy, err := tls.NewResumptionState(ticket, copied)
	if err != nil {
		return nil, false
	}
	return copy, true
}

func (c *ticketCache) Put(key string, cs *tls.ClientSessionState) {
	c.ClientSessionCache.Put(key, cs)
	if cs == nil {
		return
	}
	c.mu.Lock()
	if c.stored++; c.stored == 1 {
		close(c.got)
	}
	c.mu.Unlock()
}
