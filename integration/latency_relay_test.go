package integration

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// This file simulates distance on one machine: relays on loopback that hold
// every byte for a one-way delay in each direction, so a test can put a phone
// 20 ms from a PoP and the PoP 250 ms from its origin.
//
// The kernel completes a loopback TCP handshake at once, so a TCPRelay charges
// the connection's opening round trip itself: it holds the client's first
// bytes until one round trip after the accept. A client therefore measures a
// connect of ~0 and sees that round trip in its next phase (the TLS handshake,
// or the first byte of a plain-HTTP response). Closing is delayed like data:
// a FIN or a reset reaches the other side one one-way delay after it was sent,
// the way a real network delivers them late.
//
// Both relays dial the upstream from the client's own loopback address
// (127.0.0.2 stays 127.0.0.2), so the upstream sees who is calling, as it
// would behind a router rather than a proxy.

// relayMaxQueued bounds the bytes a TCPRelay holds per direction of one
// connection; past it the relay stops reading and TCP flow control pushes
// back on the sender. 4 MiB per 125 ms one way is about 32 MB/s.
const relayMaxQueued = 4 << 20

// TCPRelay forwards TCP connections to an upstream address, adding a one-way
// delay in each direction.
type TCPRelay struct {
	ln       *net.TCPListener
	upstream string
	oneWay   time.Duration

	mu     sync.Mutex
	conns  map[*net.TCPConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// StartTCPRelay listens on listen (e.g. "127.0.0.1:0") and forwards every
// connection to upstream with oneWay added in each direction, until the test
// ends.
func StartTCPRelay(t testing.TB, listen, upstream string, oneWay time.Duration) *TCPRelay {
	t.Helper()
	addr, err := net.ResolveTCPAddr("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenTCP("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := &TCPRelay{ln: ln, upstream: upstream, oneWay: oneWay, conns: map[*net.TCPConn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.Close)
	return r
}

// Addr is the relay's host:port.
func (r *TCPRelay) Addr() string { return r.ln.Addr().String() }

// Close stops accepting, cuts every connection and waits for the relay's
// goroutines to end.
func (r *TCPRelay) Close() {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.ln.Close()
	r.wg.Wait()
}

// track registers c so Close can cut it; it reports false once the relay is
// closing.
func (r *TCPRelay) track(c *net.TCPConn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *TCPRelay) untrack(c *net.TCPConn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

func (r *TCPRelay) accept() {
	defer r.wg.Done()
	for {
		client, err := r.ln.AcceptTCP()
		if err != nil {
			return
		}
		accepted := time.Now()
		if !r.track(client) {
			client.Close()
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.untrack(client)
			r.serve(client, accepted)
		}()
	}
}

// serve relays one connection until both directions have delivered their
// end (FIN or reset).
func (r *TCPRelay) serve(client *net.TCPConn, accepted time.Time) {
	defer client.Close()
	conn, err := relayDial("tcp", client.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(), r.upstream)
	if err != nil {
		// The refusal reaches the client a round trip after it connected.
		time.Sleep(2 * r.oneWay)
		client.SetLinger(0)
		return
	}
	upstream := conn.(*net.TCPConn)
	defer upstream.Close()
	if !r.track(upstream) {
		return
	}
	defer r.untrack(upstream)

	// The client's first bytes leave the relay one round trip after the
	// accept: the SYN and SYN-ACK a real network would have carried first.
	toUpstream := newRelayPipe(client, upstream, r.oneWay, accepted.Add(2*r.oneWay))
	toClient := newRelayPipe(upstream, client, r.oneWay, time.Time{})
	var pipes sync.WaitGroup
	for _, p := range []*relayPipe{toUpstream, toClient} {
		pipes.Add(2)
		go func() { defer pipes.Done(); p.read() }()
		go func() { defer pipes.Done(); p.write() }()
	}
	pipes.Wait()
}

// relayDial dials upstream over network ("tcp" or "udp") from the client's
// own address when it can (any 127.x.y.z on Linux), else from the default
// one.
func relayDial(network string, client netip.Addr, upstream string) (net.Conn, error) {
	if client.IsLoopback() {
		local := net.Addr(&net.TCPAddr{IP: client.AsSlice()})
		if network == "udp" {
			local = &net.UDPAddr{IP: client.AsSlice()}
		}
		d := net.Dialer{LocalAddr: local}
		if c, err := d.Dial(network, upstream); err == nil {
			return c, nil
		}
	}
	return net.Dial(network, upstream)
}

// relayEnd says what a queued chunk is: data, or the end of the stream.
type relayEnd uint8

const (
	relayData relayEnd = iota
	relayFIN
	relayReset
)

type relayChunk struct {
	data []byte
	due  time.Time
	end  relayEnd
}

// relayQueue is a FIFO of chunks bounded by the bytes it holds.
type relayQueue struct {
	mu     sync.Mutex
	cond   sync.Cond
	chunks []relayChunk
	bytes  int
	max    int
}

// push waits while the queue is full (a lone oversized chunk is let in, and
// ends of stream never wait).
func (q *relayQueue) push(c relayChunk) {
	q.mu.Lock()
	for len(c.data) > 0 && len(q.chunks) > 0 && q.bytes+len(c.data) > q.max {
		q.cond.Wait()
	}
	q.chunks = append(q.chunks, c)
	q.bytes += len(c.data)
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *relayQueue) pop() relayChunk {
	q.mu.Lock()
	for len(q.chunks) == 0 {
		q.cond.Wait()
	}
	c := q.chunks[0]
	q.chunks[0] = relayChunk{}
	q.chunks = q.chunks[1:]
	q.bytes -= len(c.data)
	q.mu.Unlock()
	q.cond.Broadcast()
	return c
}

// relayPipe carries one direction of a TCP connection: read reads src and
// queues what it got, stamped with when it is due at dst; write delivers it
// then. Due times never decrease, so order is kept.
type relayPipe struct {
	src, dst  *net.TCPConn
	oneWay    time.Duration
	notBefore time.Time
	queue     relayQueue
}

// newRelayPipe carries src to dst; nothing reaches dst before notBefore
// plus the one-way delay.
func newRelayPipe(src, dst *net.TCPConn, oneWay time.Duration, notBefore time.Time) *relayPipe {
	p := &relayPipe{src: src, dst: dst, oneWay: oneWay, notBefore: notBefore}
	p.queue.max = relayMaxQueued
	p.queue.cond.L = &p.queue.mu
	return p
}

func (p *relayPipe) due() time.Time {
	now := time.Now()
	if now.Before(p.notBefore) {
		now = p.notBefore
	}
	return now.Add(p.oneWay)
}

func (p *relayPipe) read() {
	buf := make([]byte, 64<<10)
	for {
		n, err := p.src.Read(buf)
		if n > 0 {
			p.queue.push(relayChunk{data: bytes.Clone(buf[:n]), due: p.due()})
		}
		if err != nil {
			end := relayReset
			if errors.Is(err, io.EOF) {
				end = relayFIN
			}
			p.queue.push(relayChunk{end: end, due: p.due()})
			return
		}
	}
}

func (p *relayPipe) write() {
	failed := false
	for {
		c := p.queue.pop()
		if !failed {
			time.Sleep(time.Until(c.due))
		}
		switch c.end {
		case relayFIN:
			if !failed {
				p.dst.CloseWrite()
			}
			return
		case relayReset:
			p.dst.SetLinger(0)
			p.dst.Close()
			return
		}
		if failed {
			continue
		}
		if _, err := p.dst.Write(c.data); err != nil {
			// dst answered with a reset (or is gone): the sender hears of
			// it a one-way delay later. Keep draining until src ends.
			failed = true
			src := p.src
			time.AfterFunc(p.oneWay, func() {
				src.SetLinger(0)
				src.Close()
			})
		}
	}
}

// UDPRelay forwards datagrams to an upstream address, adding a one-way delay
// in each direction. Each client address gets its own upstream socket, so a
// QUIC connection works through it; a socket idle for IdleTimeout is closed.
type UDPRelay struct {
	pc          *net.UDPConn
	upstream    string
	oneWay      time.Duration
	idleTimeout time.Duration

	mu       sync.Mutex
	sessions map[netip.AddrPort]*relayUDPSession
	done     chan struct{}
	wg       sync.WaitGroup
}

// relayUDPQueue is how many datagrams a UDPRelay holds per direction of a
// session; beyond that it drops them, as a full router queue would.
const relayUDPQueue = 4096

type relayDatagram struct {
	data []byte
	due  time.Time
}

type relayUDPSession struct {
	client     netip.AddrPort
	up         net.Conn
	toUpstream chan relayDatagram
	toClient   chan relayDatagram
	lastActive atomic.Int64 // unix nanoseconds
}

// StartUDPRelay listens on listen (e.g. "127.0.0.1:0", or a TCPRelay's Addr
// to share its port) and forwards datagrams to upstream with oneWay added in
// each direction, until the test ends. Per-client sockets idle for 30 s are
// closed.
func StartUDPRelay(t testing.TB, listen, upstream string, oneWay time.Duration) *UDPRelay {
	t.Helper()
	return StartUDPRelayIdle(t, listen, upstream, oneWay, 30*time.Second)
}

// StartUDPRelayIdle is StartUDPRelay with the per-client idle timeout given.
func StartUDPRelayIdle(t testing.TB, listen, upstream string, oneWay, idleTimeout time.Duration) *UDPRelay {
	t.Helper()
	laddr, err := net.ResolveUDPAddr("udp", listen)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenUDP("udp", laddr)
	if err != nil {
		t.Fatal(err)
	}
	r := &UDPRelay{
		pc:          pc,
		upstream:    upstream,
		oneWay:      oneWay,
		idleTimeout: idleTimeout,
		sessions:    map[netip.AddrPort]*relayUDPSession{},
		done:        make(chan struct{}),
	}
	r.wg.Add(2)
	go r.readClients()
	go r.expire()
	t.Cleanup(r.Close)
	return r
}

// Addr is the relay's host:port.
func (r *UDPRelay) Addr() string { return r.pc.LocalAddr().String() }

// Sessions is the number of client addresses with an open upstream socket.
func (r *UDPRelay) Sessions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sessions)
}

// Close stops the relay, closes every upstream socket and waits for the
// relay's goroutines to end.
func (r *UDPRelay) Close() {
	select {
	case <-r.done:
		return
	default:
	}
	close(r.done)
	r.pc.Close()
	r.mu.Lock()
	for _, s := range r.sessions {
		r.endSession(s)
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *UDPRelay) readClients() {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := r.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			select {
			case <-r.done:
				return
			default:
				continue
			}
		}
		d := relayDatagram{data: bytes.Clone(buf[:n]), due: time.Now().Add(r.oneWay)}
		r.mu.Lock()
		select {
		case <-r.done:
			// Close has ended the sessions: one started now would never
			// be closed, and Close would wait for it forever.
			r.mu.Unlock()
			return
		default:
		}
		s := r.sessions[from]
		if s == nil {
			if s = r.startSession(from); s == nil {
				r.mu.Unlock()
				continue
			}
		}
		s.lastActive.Store(time.Now().UnixNano())
		// Sent under mu so endSession cannot close the channel meanwhile.
		select {
		case s.toUpstream <- d:
		default: // queue full: dropped
		}
		r.mu.Unlock()
	}
}

// startSession opens the client's upstream socket, from the client's own
// address when it can. It is called with mu held.
func (r *UDPRelay) startSession(client netip.AddrPort) *relayUDPSession {
	up, err := relayDial("udp", client.Addr(), r.upstream)
	if err != nil {
		return nil
	}
	s := &relayUDPSession{
		client:     client,
		up:         up,
		toUpstream: make(chan relayDatagram, relayUDPQueue),
		toClient:   make(chan relayDatagram, relayUDPQueue),
	}
	r.sessions[client] = s
	r.wg.Add(3)
	go func() {
		defer r.wg.Done()
		for d := range s.toUpstream {
			time.Sleep(time.Until(d.due))
			s.up.Write(d.data)
		}
	}()
	go func() {
		defer r.wg.Done()
		defer close(s.toClient)
		buf := make([]byte, 64<<10)
		for {
			n, err := s.up.Read(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue // e.g. ICMP port unreachable from a restarting upstream
			}
			s.lastActive.Store(time.Now().UnixNano())
			select {
			case s.toClient <- relayDatagram{data: bytes.Clone(buf[:n]), due: time.Now().Add(r.oneWay)}:
			default:
			}
		}
	}()
	go func() {
		defer r.wg.Done()
		for d := range s.toClient {
			time.Sleep(time.Until(d.due))
			r.pc.WriteToUDPAddrPort(d.data, s.client)
		}
	}()
	return s
}

// endSession closes a session's socket and queues; called with mu held.
func (r *UDPRelay) endSession(s *relayUDPSession) {
	delete(r.sessions, s.client)
	close(s.toUpstream)
	s.up.Close()
}

// expire closes the sockets of clients idle for longer than idleTimeout.
func (r *UDPRelay) expire() {
	defer r.wg.Done()
	tick := time.NewTicker(max(r.idleTimeout/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-tick.C:
		}
		cutoff := time.Now().Add(-r.idleTimeout).UnixNano()
		r.mu.Lock()
		for _, s := range r.sessions {
			if s.lastActive.Load() < cutoff {
				r.endSession(s)
			}
		}
		r.mu.Unlock()
	}
}
