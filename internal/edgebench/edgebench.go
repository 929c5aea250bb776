package edgebench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Proto is the HTTP version spoken to the target.
type Proto string

// The protocols edgebench speaks.
const (
	H1 Proto = "h1" // HTTP/1.1 (over TLS for https, cleartext for http)
	H2 Proto = "h2" // HTTP/2 (ALPN h2 over TLS; prior-knowledge h2c for http)
	H3 Proto = "h3" // HTTP/3 over QUIC (https only)
)

// ParseProtos parses a comma-separated list of protocols such as "h1,h2,h3".
func ParseProtos(list string) ([]Proto, error) {
	var protos []Proto
	for _, field := range strings.Split(list, ",") {
		p := Proto(strings.TrimSpace(field))
		if err := p.validate(); err != nil {
			return nil, err
		}
		protos = append(protos, p)
	}
	return protos, nil
}

func (p Proto) validate() error {
	switch p {
	case H1, H2, H3:
		return nil
	}
	return fmt.Errorf("edgebench: protocol %q: must be h1, h2 or h3", string(p))
}

// Defaults applied to a zero Config field.
const (
	DefaultRequests = 20
	DefaultTimeout  = 10 * time.Second
)

// Config says what to measure and how.
type Config struct {
	// URL is the target, http:// or https:// (h3 needs https).
	URL string
	// Proto is the HTTP version to speak; default h2.
	Proto Proto
	// Cold gives every request a fresh transport, so a fresh connection and
	// a full handshake (no TLS session resumption), closed afterwards. When
	// false one transport is reused and one unmeasured warm-up request opens
	// its connection first. Ignored when Mix is set.
	Cold bool
	// Mix, when set, measures connection classes instead: every request
	// opens a fresh connection of a class dealt by weight (new, resumed,
	// 0rtt; see [Class]). A mix that resumes first sends one unmeasured
	// request to get a session ticket. Each request is reported under the
	// outcome that really happened (Result.Outcomes).
	Mix Mix `json:",omitempty"`
	// Requests is how many measured requests probe mode ([Run]) sends;
	// default 20. [Load] ignores it.
	Requests int
	// Header is added to every request, e.g. Accept-Encoding: br. A Host
	// entry sets the request's Host (and so the TLS server name).
	Header http.Header
	// Insecure skips certificate verification (tls internal, tests).
	Insecure bool
	// Timeout bounds each request, handshakes and body included; default 10s.
	Timeout time.Duration
	// LocalAddr is an optional source IP to dial from, e.g. "127.0.0.2"
	// (the TCP source for h1/h2, the UDP socket's address for h3).
	LocalAddr string
	// OnSample, if set, is called by [Run] after each measured request
	// (for progress on long runs).
	OnSample func(Sample) `json:"-"`
}

// normalize fills defaults and refuses a config that cannot be measured.
func (c *Config) normalize() error {
	if c.Proto == "" {
		c.Proto = H2
	}
	if err := c.Proto.validate(); err != nil {
		return err
	}
	if c.Requests == 0 {
		c.Requests = DefaultRequests
	}
	if c.Requests < 0 {
		return fmt.Errorf("edgebench: requests %d: must be at least 1", c.Requests)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Timeout < 0 {
		return fmt.Errorf("edgebench: timeout %v: must be positive", c.Timeout)
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return fmt.Errorf("edgebench: URL %q: %v", c.URL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("edgebench: URL %q: must be http://host/... or https://host/...", c.URL)
	}
	if c.Proto == H3 && u.Scheme != "https" {
		return fmt.Errorf("edgebench: URL %q: h3 needs an https:// URL (QUIC always carries TLS)", c.URL)
	}
	if err := c.Mix.Validate(c.Proto, u.Scheme == "https"); err != nil {
		return err
	}
	if c.LocalAddr != "" && net.ParseIP(c.LocalAddr) == nil {
		return fmt.Errorf("edgebench: local address %q: must be an IP address such as 127.0.0.2", c.LocalAddr)
	}
	return nil
}

// Label names the config in tables and progress lines: "h2 cold".
func (c *Config) Label() string {
	if len(c.Mix) == 1 {
		return string(c.Proto) + " " + string(c.Mix[0].Class)
	}
	if len(c.Mix) > 1 {
		return string(c.Proto) + " mix " + c.Mix.String()
	}
	if c.Cold {
		return string(c.Proto) + " cold"
	}
	return string(c.Proto) + " warm"
}

// Sample is one measured request. Connect and TLS are the durations of
// those phases (0 on a reused connection); TTFB and Total are measured from
// the request's start (in load mode, from its scheduled start).
type Sample struct {
	DNS, Connect, TLS, TTFB, Total time.Duration
	// Reused is true when the request went out on an existing connection.
	Reused bool
	Status int
	// Proto is the version the server actually spoke, e.g. "HTTP/2.0".
	Proto string
	// BodyBytes is the body as received on the wire (not decoded).
	BodyBytes int64
	// ServerTiming sums the server's Server-Timing dur per metric name,
	// header and trailer together, each sum at most the largest dur
	// accepted (1e9 ms).
	ServerTiming map[string]time.Duration
	// PoP is what the PoP's own entries (edge, origin, origin-conn,
	// client, rtt...) say about the request, for the split; nil when the
	// response carried none.
	PoP *PoPTiming `json:",omitempty"`
	// TLSMode is the TLS mode the client saw: none (cleartext), new,
	// resumed or 0rtt; empty for a failed request. The split compares it
	// with the mode the PoP reports.
	TLSMode string `json:",omitempty"`
	// Class is the connection class asked for (empty without a mix);
	// Outcome what happened: the class itself, or OutcomeNotResumed,
	// Outcome0RTTRefused, OutcomeUnexpectedResume. Empty for a failed
	// request.
	Class   Class  `json:",omitempty"`
	Outcome string `json:",omitempty"`
	Err     error
}

// MarshalJSON writes Err as its message.
func (s Sample) MarshalJSON() ([]byte, error) {
	type plain Sample
	out := struct {
		plain
		Err string `json:"Err,omitempty"`
	}{plain: plain(s)}
	if s.Err != nil {
		out.Err = s.Err.Error()
	}
	return json.Marshal(out)
}

// Stats are nearest-rank percentiles.
type Stats struct{ P50, P90, P99 time.Duration }

// TimingStats aggregates one Server-Timing metric's dur over the responses
// that carried it.
type TimingStats struct {
	Count int
	Mean  time.Duration
	Stats
}

// Result is a probe run's samples and their summary. Percentiles are over
// the successful samples (Err == nil, any status).
type Result struct {
	Config Config
	// Warmup is how many unmeasured requests ran before the samples (1 in
	// warm mode: the request that opened the connection).
	Warmup  int
	Samples []Sample
	Errors  int
	// Statuses counts responses by status code; codes outside 100..999
	// under StatusMalformed (see statusKey).
	Statuses                                  map[int]int
	DNS, Connect, TLS, Handshake, TTFB, Total Stats // Handshake = Connect+TLS per sample
	// BodyBytes is the median body size of the successful samples.
	BodyBytes    int64
	ServerTiming map[string]TimingStats
	// Outcomes holds, with a Mix, each outcome's distributions (from
	// histograms, so p99.9 too); ClassErrors the failed requests per class
	// asked. Timeline counts responses and errors per second of the run.
	Outcomes    map[string]*OutcomeStats `json:",omitempty"`
	ClassErrors ClassErrors              `json:",omitempty"`
	Timeline    []TimelineSecond
}

// Run measures cfg.Requests requests to cfg.URL one after another. It
// returns an error for a config it cannot run or a failed warm-up request;
// failed measured requests are counted in Result.Errors.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	res := &Result{Config: cfg}
	conns, err := openConnections(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer conns.close()
	res.Warmup = conns.warmup
	agg := newClassAggregate(time.Now())
	for range cfg.Requests {
		if err = ctx.Err(); err != nil {
			break
		}
		class := conns.pick()
		c, done := conns.client(class)
		s := c.do(ctx, &cfg, class, time.Now())
		done()
		agg.add(s, time.Now())
		res.Samples = append(res.Samples, s)
		if cfg.OnSample != nil {
			cfg.OnSample(s)
		}
	}
	res.Outcomes, res.ClassErrors, res.Timeline = agg.summarize()
	res.summarize()
	return res, err
}

// connections hands each request of a run its client: the one warm
// connection every request shares, or, in cold runs and mixes, a fresh
// connection of the request's class, resuming from the tickets primed for
// its class.
type connections struct {
	cfg     *Config
	warm    *client // nil when every request gets a fresh connection
	tickets classTickets
	picker  *mixPicker // nil without a mix
	warmup  int        // unmeasured requests sent to open or prime
}

func openConnections(ctx context.Context, cfg *Config) (*connections, error) {
	cs := &connections{cfg: cfg}
	if len(cfg.Mix) > 0 {
		cs.picker = newMixPicker(cfg.Mix)
	}
	var err error
	switch {
	case cfg.Mix.needsTicket():
		if cs.tickets, err = primeTickets(ctx, cfg); err != nil {
			return nil, err
		}
		cs.warmup = len(cs.tickets)
	case !cfg.Cold && len(cfg.Mix) == 0:
		if cs.warm, err = openWarm(ctx, cfg); err != nil {
			return nil, err
		}
		cs.warmup = 1
	}
	return cs, nil
}

// pick is the class of the next request: the mix's next, or the run's own
// (the zero Class) without a mix. Only the scheduling goroutine calls it.
func (cs *connections) pick() Class {
	if cs.picker == nil {
		return ""
	}
	return cs.picker.next()
}

// client returns the client for a request of class, and what to call once
// the request is done (closing a fresh connection).
func (cs *connections) client(class Class) (c *client, done func()) {
	if cs.warm != nil {
		return cs.warm, func() {}
	}
	c = newClient(cs.cfg, class, cs.tickets)
	return c, c.close
}

func (cs *connections) close() {
	if cs.warm != nil {
		cs.warm.close()
	}
}

// ticketWait bounds how long a run waits for a priming request's session
// ticket (it normally arrives with the response).
const ticketWait = time.Second

// classTickets are the session caches of the classes that resume, one per
// class, each primed by a connection of its class. (Whether a QUIC ticket
// allows 0-RTT is the server's choice, not how the storing connection was
// dialed: the lab's early-data check resumes in 0-RTT from a ticket that a
// plain Dial stored.)
type classTickets map[Class]*ticketCache

// primeTickets sends one unmeasured request per resuming class of the mix,
// on a fresh connection of that class, to get its first session ticket. A
// server that issues none is not an error: the measured requests then
// report "not resumed".
func primeTickets(ctx context.Context, cfg *Config) (classTickets, error) {
	tickets := classTickets{}
	for _, cw := range cfg.Mix {
		if cw.Class == ClassNew {
			continue
		}
		cache := newTicketCache()
		tickets[cw.Class] = cache
		c := newClient(cfg, cw.Class, tickets)
		s := c.do(ctx, cfg, cw.Class, time.Now())
		c.close()
		if s.Err != nil {
			return nil, fmt.Errorf("edgebench: priming request (for a session ticket) to %s over %s: %w", cfg.URL, cfg.Proto, s.Err)
		}
		wait := time.NewTimer(min(ticketWait, cfg.Timeout))
		select {
		case <-cache.got:
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
			return nil, ctx.Err()
		}
		wait.Stop()
	}
	return tickets, nil
}

// StatusMalformed is the Statuses key of responses whose status code is
// outside 100..999.
const StatusMalformed = 0

// statusKey is the Statuses key of a response's status code. The h2 and h3
// clients accept any integer as :status, so a server sending a new code in
// every response would otherwise grow a load run's Statuses map without
// bound; three digits, as HTTP/1.1 requires, bound it to 900 keys.
func statusKey(code int) int {
	if code < 100 || code > 999 {
		return StatusMalformed
	}
	return code
}

func (r *Result) summarize() {
	var dns, connect, tlsd, handshake, ttfb, total []time.Duration
	var bodies []int64
	timings := timingAggregate{}
	r.Errors = 0
	r.Statuses = map[int]int{}
	for _, s := range r.Samples {
		if s.Err != nil {
			r.Errors++
			continue
		}
		r.Statuses[statusKey(s.Status)]++
		dns = append(dns, s.DNS)
		connect = append(connect, s.Connect)
		tlsd = append(tlsd, s.TLS)
		handshake = append(handshake, s.Connect+s.TLS)
		ttfb = append(ttfb, s.TTFB)
		total = append(total, s.Total)
		bodies = append(bodies, s.BodyBytes)
		timings.add(s.ServerTiming)
	}
	r.DNS, r.Connect, r.TLS = percentiles(dns), percentiles(connect), percentiles(tlsd)
	r.Handshake, r.TTFB, r.Total = percentiles(handshake), percentiles(ttfb), percentiles(total)
	r.BodyBytes = median(bodies)
	r.ServerTiming = timings.stats()
}

// errBody marks a failure while reading the response body.
var errBody = errors.New("reading body")
