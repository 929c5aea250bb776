package edgebench

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http/httptrace"
	"net/netip"
	"strconv"
	"sync"

	"github.com/quic-go/quic-go"
)

// quicDialer is the http3 transport's Dial. It reports the phases through
// the request's httptrace like the TCP dialer does, waits until the QUIC
// handshake is complete (quic Dial, not DialEarly) so TLS is the whole
// handshake, except for the 0rtt class (early), and binds its UDP sockets to
// the configured local address.
type quicDialer struct {
	local net.IP
	// early dials with quic DialEarly: the dial returns after the first
	// flight, so a 0-RTT request goes out with it; TLS is then the time
	// the request waited for the dial, not the whole handshake.
	early bool

	mu         sync.Mutex
	transports []*quic.Transport // one per dial, each on a socket of its own
}

func (d *quicDialer) dial(ctx context.Context, addr string, tlsConf *tls.Config, conf *quic.Config) (*quic.Conn, error) {
	trace := httptrace.ContextClientTrace(ctx)
	if trace == nil {
		trace = &httptrace.ClientTrace{}
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", portText, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		if trace.DNSStart != nil {
			trace.DNSStart(httptrace.DNSStartInfo{Host: host})
		}
		ips, lookupErr := net.DefaultResolver.LookupNetIP(ctx, d.network(), host)
		if trace.DNSDone != nil {
			trace.DNSDone(httptrace.DNSDoneInfo{Err: lookupErr})
		}
		if lookupErr != nil {
			return nil, lookupErr
		}
		ip = ips[0]
	}
	raddr := net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip.Unmap(), uint16(port)))

	if trace.ConnectStart != nil {
		trace.ConnectStart("udp", raddr.String())
	}
	socket, err := net.ListenUDP("udp", &net.UDPAddr{IP: d.local})
	if trace.ConnectDone != nil {
		trace.ConnectDone("udp", raddr.String(), err)
	}
	if err != nil {
		return nil, err
	}
	tr := &quic.Transport{Conn: socket}

	if trace.TLSHandshakeStart != nil {
		trace.TLSHandshakeStart()
	}
	var conn *quic.Conn
	if d.early {
		conn, err = tr.DialEarly(ctx, raddr, tlsConf, conf)
	} else {
		conn, err = tr.Dial(ctx, raddr, tlsConf, conf)
	}
	if dialed, ok := ctx.Value(dialedQUICKey{}).(*dialedQUIC); ok && conn != nil {
		dialed.set(conn)
	}
	if trace.TLSHandshakeDone != nil {
		var state tls.ConnectionState
		if conn != nil {
			state = conn.ConnectionState().TLS
		}
		trace.TLSHandshakeDone(state, err)
	}
	if err != nil {
		tr.Close()
		socket.Close()
		return nil, err
	}
	d.mu.Lock()
	d.transports = append(d.transports, tr)
	d.mu.Unlock()
	return conn, nil
}

// network picks the address family the local address can reach.
func (d *quicDialer) network() string {
	switch {
	case d.local == nil:
		return "ip"
	case d.local.To4() != nil:
		return "ip4"
	}
	return "ip6"
}

// close releases every socket the dialer opened (quic.Transport does not
// close a socket it was given).
func (d *quicDialer) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, tr := range d.transports {
		tr.Close()
		tr.Conn.Close()
	}
	d.transports = nil
}

// dialedQUIC carries the connection dialed for one request back to it
// (through the request's context), so the request can ask the connection
// whether it resumed and used 0-RTT.
type dialedQUIC struct {
	mu   sync.Mutex
	conn *quic.Conn
}

type dialedQUICKey struct{}

// set keeps the last connection: after a 0-RTT rejection the transport
// retries on a new one, and that one answered.
func (d *dialedQUIC) set(c *quic.Conn) {
	d.mu.Lock()
	d.conn = c
	d.mu.Unlock()
}

func (d *dialedQUIC) get() *quic.Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conn
}
