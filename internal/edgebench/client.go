package edgebench

import (
	"context"
	"crypto/tls"
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

func newClient(cfg *Config) *client {
	var local net.IP
	if cfg.LocalAddr != "" {
		local = net.ParseIP(cfg.LocalAddr)
	}
	// No session cache: a cold request pays a full handshake, as a new
	// visitor does.
	tlsConfig := &tls.Config{InsecureSkipVerify: cfg.Insecure}
	if host := cfg.Header.Get("Host"); host != "" {
		tlsConfig.ServerName = hostOnly(host)
	}
	if cfg.Proto == H3 {
		d := &quicDialer{local: local}
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
	c := newClient(cfg)
	if s := c.do(ctx, cfg, time.Now()); s.Err != nil {
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
// load mode.
func (c *client) do(ctx context.Context, cfg *Config, start time.Time) Sample {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var phases phaseRecorder
	ctx = httptrace.WithClientTrace(ctx, phases.trace())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.URL, nil)
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
		s.Total, s.Err = time.Since(start), err
		return s
	}
	n, err := io.Copy(io.Discard, resp.Body)
	end := time.Now()
	resp.Body.Close()

	s := phases.sample(start, headersAt)
	s.Total = end.Sub(start)
	s.Status, s.Proto, s.BodyBytes = resp.StatusCode, resp.Proto, n
	s.ServerTiming = serverTimingDurations(resp.Header.Values("Server-Timing"))
	if err != nil {
		s.Err = fmt.Errorf("%w: %w", errBody, err)
	}
	return s
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
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			if err == nil {
				at(&p.tlsEnd, false)
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
