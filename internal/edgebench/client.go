package edgebench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// client is one transport: a fresh one per request in cold mode, one
// shared by every request in warm mode.
type client struct {
	rt    http.RoundTripper
	close func()
}

// newClient opens a transport. Without a class or for class new it has no
// session cache: a request pays a full handshake, as a new visitor does.
// The resumed and 0rtt classes use their class's tickets, a returning
// visitor's.
func newClient(cfg *Config, class Class, tickets classTickets) *client {
	var local net.IP
	if cfg.LocalAddr != "" {
		local = net.ParseIP(cfg.LocalAddr)
	}
	tlsConfig := &tls.Config{InsecureSkipVerify: cfg.Insecure}
	if cache := tickets[class]; cache != nil {
		tlsConfig.ClientSessionCache = cache
	}
	if host := cfg.Header.Get("Host"); host != "" {
		tlsConfig.ServerName = hostOnly(host)
	}
	if cfg.Proto == H3 {
		d := &quicDialer{local: local, early: class == Class0RTT}
		tr := &http3.Transport{TLSClientConfig: tlsConfig, Dial: d.dial, DisableCompression: true}
		return &client{rt: tr, close: func() { tr.Close(); d.close() }}
	}
	dialer := &net.Dialer{Timeout: cfg.Timeout}
	if local != nil {
		dialer.LocalAddr = &net.TCPAddr{IP: local}
	}
	protocols := new(http.Protocols)
	if cfg.Proto == H1 {
		protocols.SetHTTP1(true)
	} else {
		protocols.SetHTTP2(true)
		protocols.SetUnencryptedHTTP2(true)
	}
	tr := &http.Transport{
		Proxy:               nil, // measure the path to the target, never a proxy
		DialContext:         dialer.DialContext,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: cfg.Timeout,
		DisableCompression:  true, // count the body as sent; the caller chooses Accept-Encoding
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096, // load mode over h1 keeps many connections busy
		IdleConnTimeout:     90 * time.Second,
		Protocols:           protocols,
	}
	return &client{rt: tr, close: tr.CloseIdleConnections}
}

// openWarm opens the one transport of a warm run with an unmeasured request,
// so the measured ones find its connection open.
func openWarm(ctx context.Context, cfg *Config) (*client, error) {
	c := newClient(cfg, "", nil)
	if s := c.do(ctx, cfg, "", time.Now()); s.Err != nil {
		c.close()
		return nil, fmt.Errorf("edgebench: warm-up request to %s over %s: %w", cfg.URL, cfg.Proto, s.Err)
	}
	return c, nil
}

func hostOnly(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return hostport
}

// do sends one GET and reads its body to the end. TTFB and Total are
// measured from start, which is now in probe mode and the scheduled time in
// load mode. With a class, the sample says which outcome the connection
// really had (see outcome).
func (c *client) do(ctx context.Context, cfg *Config, class Class, start time.Time) Sample {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var phases phaseRecorder
	ctx = httptrace.WithClientTrace(ctx, phases.trace())
	var dialed *dialedQUIC
	method := http.MethodGet
	if class != "" && cfg.Proto == H3 {
		dialed = &dialedQUIC{}
		ctx = context.WithValue(ctx, dialedQUICKey{}, dialed)
		if class == Class0RTT {
			method = http3.MethodGet0RTT // sent before the handshake completes
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, cfg.URL, nil)
	if err != nil {
		return Sample{Err: err}
	}
	for name, values := range cfg.Header {
		key := http.CanonicalHeaderKey(name)
		if key == "Host" {
			req.Host = values[0]
			continue
		}
		req.Header[key] = append([]string(nil), values...)
	}

	resp, err := c.rt.RoundTrip(req)
	headersAt := time.Now()
	if err != nil {
		s := phases.sample(start, headersAt)
		s.Total, s.Err, s.Class = time.Since(start), err, class
		return s
	}
	n, err := io.Copy(io.Discard, resp.Body)
	end := time.Now()
	resp.Body.Close()

	s := phases.sample(start, headersAt)
	s.Total = end.Sub(start)
	s.Status, s.Proto, s.BodyBytes = resp.StatusCode, resp.Proto, n
	// The trailer is complete once the body has been read to its end.
	s.ServerTiming, s.PoP = serverTimingResponse(resp.Header.Values("Server-Timing"), resp.Trailer.Values("Server-Timing"))
	https := req.URL.Scheme == "https"
	if err != nil {
		s.Err = fmt.Errorf("%w: %w", errBody, err)
	}
	if class != "" {
		s.Class = class
		resumed, early, err := phases.resumption(ctx, dialed)
		if err != nil && s.Err == nil {
			s.Err = err
		}
		s.Outcome = outcome(class, resumed, early)
		s.TLSMode = clientTLSMode(https, resumed, early)
	} else {
		// Without a class the client keeps no session cache: every
		// connection, warm or cold, had a full handshake.
		p := &phases
		p.mu.Lock()
		s.TLSMode = clientTLSMode(https, p.tlsState.DidResume, false)
		p.mu.Unlock()
	}
	return s
}

// resumption says whether the request's connection resumed a session and
// carried 0-RTT data: from the TLS handshake for h1/h2, from the QUIC
// connection for h3 once its handshake is complete (a 0-RTT request is
// answered before the client has seen that, or not at all).
func (p *phaseRecorder) resumption(ctx context.Context, dialed *dialedQUIC) (resumed, early bool, err error) {
	if dialed == nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.tlsState.DidResume, false, nil
	}
	conn := dialed.get()
	if conn == nil {
		return false, false, errors.New("h3: no QUIC connection was dialed for the request")
	}
	select {
	case <-conn.HandshakeComplete():
	case <-ctx.Done():
		return false, false, fmt.Errorf("h3: handshake not complete after the response: %w", ctx.Err())
	}
	state := conn.ConnectionState()
	return state.TLS.DidResume, state.Used0RTT, nil
}

// phaseRecorder collects the httptrace events of one request. The dial may
// run in another goroutine and outlive a failed request, hence the lock.
type phaseRecorder struct {
	mu                       sync.Mutex
	dnsStart, dnsDone        time.Time
	connectStart, connectEnd time.Time
	tlsStart, tlsEnd         time.Time
	firstByte                time.Time
	reused                   bool
	tlsState                 tls.ConnectionState
}

func (p *phaseRecorder) trace() *httptrace.ClientTrace {
	at := func(t *time.Time, first bool) {
		p.mu.Lock()
		if !first || t.IsZero() {
			*t = time.Now()
		}
		p.mu.Unlock()
	}
	return &httptrace.ClientTrace{
		DNSStart: func(httptrace.DNSStartInfo) { at(&p.dnsStart, true) },
		DNSDone:  func(httptrace.DNSDoneInfo) { at(&p.dnsDone, false) },
		// With several addresses the dialer may try more than one: the
		// phase runs from the first attempt to the one that connected.
		ConnectStart: func(string, string) { at(&p.connectStart, true) },
		ConnectDone: func(_, _ string, err error) {
			if err == nil {
				at(&p.connectEnd, false)
			}
		},
		TLSHandshakeStart: func() { at(&p.tlsStart, true) },
		TLSHandshakeDone: func(state tls.ConnectionState, err error) {
			if err == nil {
				at(&p.tlsEnd, false)
				p.mu.Lock()
				p.tlsState = state
				p.mu.Unlock()
			}
		},
		GotConn: func(info httptrace.GotConnInfo) {
			p.mu.Lock()
			p.reused = info.Reused
			p.mu.Unlock()
		},
		GotFirstResponseByte: func() { at(&p.firstByte, true) },
	}
}

// sample turns the recorded events into phase durations. headersAt stands
// in for the first byte if the transport did not report it.
func (p *phaseRecorder) sample(start, headersAt time.Time) Sample {
	p.mu.Lock()
	defer p.mu.Unlock()
	span := func(from, to time.Time) time.Duration {
		if from.IsZero() || to.IsZero() || to.Before(from) {
			return 0
		}
		return to.Sub(from)
	}
	s := Sample{Reused: p.reused}
	if !p.reused {
		// A reused connection's request may still have started a dial
		// (the transport races one against an idle connection being
		// returned); that dial is not what this request waited for.
		s.DNS = span(p.dnsStart, p.dnsDone)
		s.Connect = span(p.connectStart, p.connectEnd)
		s.TLS = span(p.tlsStart, p.tlsEnd)
	}
	firstByte := p.firstByte
	if firstByte.IsZero() {
		firstByte = headersAt
	}
	s.TTFB = firstByte.Sub(start)
	return s
}
