package integration

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// latencyUpstream accepts TCP connections on 127.0.0.1 and runs serve on each
// until the test ends.
func latencyUpstream(t *testing.T, serve func(c *net.TCPConn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); defer c.Close(); serve(c.(*net.TCPConn)) }()
		}
	}()
	return ln.Addr().String()
}

func latencyEcho(c *net.TCPConn) { io.Copy(c, c) }

// latencyRoundTrip writes msg and reads as many bytes back, returning how
// long that took.
func latencyRoundTrip(t *testing.T, c net.Conn, msg string) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	if string(buf) != msg {
		t.Fatalf("echo %q, want %q", buf, msg)
	}
	return time.Since(start)
}

func TestLatencyRelayTCP(t *testing.T) {
	const oneWay = 50 * time.Millisecond
	t.Run("delay", func(t *testing.T) {
		relay := StartTCPRelay(t, "127.0.0.1:0", latencyUpstream(t, latencyEcho), oneWay)
		start := time.Now()
		c, err := net.Dial("tcp", relay.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		connect := time.Since(start)
		// The first exchange pays the connection's opening round trip too:
		// from the dial, two round trips.
		first := connect + latencyRoundTrip(t, c, "hello")
		second := latencyRoundTrip(t, c, "again")
		t.Logf("connect %v, dial to first answer %v, second round trip %v", connect, first, second)
		if first < 4*oneWay || first > 4*oneWay+250*time.Millisecond {
			t.Errorf("dial to first answer %v, want 2 x RTT (%v) + noise", first, 4*oneWay)
		}
		if second < 2*oneWay || second >= 300*time.Millisecond {
			t.Errorf("round trip %v, want >= %v and < 300ms", second, 2*oneWay)
		}
	})

	t.Run("order", func(t *testing.T) {
		relay := StartTCPRelay(t, "127.0.0.1:0", latencyUpstream(t, latencyEcho), 5*time.Millisecond)
		c, err := net.Dial("tcp", relay.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sent := make([]byte, 6<<20) // more than the relay buffers per direction
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range sent {
			sent[i] = byte(rng.Uint32())
		}
		go func() {
			c.Write(sent)
			c.(*net.TCPConn).CloseWrite()
		}()
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, sent) {
			t.Fatalf("echoed %d bytes differ from the %d sent", len(got), len(sent))
		}
	})

	t.Run("half-close", func(t *testing.T) {
		// The upstream reads to EOF, then answers with how much it got
		// and closes: both FINs travel through the relay.
		relay := StartTCPRelay(t, "127.0.0.1:0", latencyUpstream(t, func(c *net.TCPConn) {
			n, _ := io.Copy(io.Discard, c)
			c.Write([]byte{byte(n)})
		}), oneWay)
		c, err := net.Dial("tcp", relay.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("seven!!"))
		start := time.Now()
		c.(*net.TCPConn).CloseWrite()
		got, err := io.ReadAll(c)
		took := time.Since(start)
		if err != nil || !bytes.Equal(got, []byte{7}) {
			t.Fatalf("after half-close got %v, %v; want [7], EOF", got, err)
		}
		if took < 2*oneWay {
			t.Errorf("answer and FIN after %v, want at least a round trip (%v)", took, 2*oneWay)
		}
	})

	t.Run("upstream reset", func(t *testing.T) {
		relay := StartTCPRelay(t, "127.0.0.1:0", latencyUpstream(t, func(c *net.TCPConn) {
			c.Read(make([]byte, 1))
			c.SetLinger(0)
			c.Close()
		}), oneWay)
		c, err := net.Dial("tcp", relay.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		c.Write([]byte("x"))
		_, err = c.Read(make([]byte, 1))
		took := time.Since(start)
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read %v, want connection reset", err)
		}
		if took < 2*oneWay {
			t.Errorf("reset after %v, want at least a round trip (%v)", took, 2*oneWay)
		}
	})

	t.Run("client reset", func(t *testing.T) {
		seen := make(chan error, 1)
		var readAt time.Time
		relay := StartTCPRelay(t, "127.0.0.1:0", latencyUpstream(t, func(c *net.TCPConn) {
			c.Read(make([]byte, 1))
			_, err := c.Read(make([]byte, 1))
			readAt = time.Now()
			seen <- err
		}), oneWay)
		c, err := net.Dial("tcp", relay.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("x"))
		time.Sleep(4 * oneWay) // the byte has arrived
		c.(*net.TCPConn).SetLinger(0)
		closedAt := time.Now()
		c.Close()
		select {
		case err := <-seen:
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("upstream read %v, want connection reset", err)
			}
			if late := readAt.Sub(closedAt); late < oneWay {
				t.Errorf("upstream saw the reset %v after it was sent, want >= %v", late, oneWay)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("upstream never saw the client's reset")
		}
	})
}

func TestLatencyRelayUDP(t *testing.T) {
	const oneWay = 50 * time.Millisecond
	upstream, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	sources := make(chan string, 1000)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := upstream.ReadFromUDP(buf)
			if err != nil {
				return
			}
			select {
			case sources <- from.IP.String():
			default:
			}
			upstream.WriteToUDP(buf[:n], from)
		}
	}()
	t.Cleanup(func() { upstream.Close() })
	relay := StartUDPRelayIdle(t, "127.0.0.1:0", upstream.LocalAddr().String(), oneWay, 300*time.Millisecond)

	raddr, _ := net.ResolveUDPAddr("udp", relay.Addr())
	c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)}, raddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))

	rt := latencyRoundTrip(t, c, "ping")
	if rt < 2*oneWay || rt >= 300*time.Millisecond {
		t.Errorf("round trip %v, want >= %v and < 300ms", rt, 2*oneWay)
	}
	if src := <-sources; src != "127.0.0.2" {
		t.Errorf("upstream saw the datagram from %s, want the client's own 127.0.0.2", src)
	}

	// A burst comes back in the order it was sent.
	const burst = 200
	for i := range burst {
		c.Write([]byte{byte(i)})
	}
	buf := make([]byte, 16)
	for i := range burst {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if n != 1 || buf[0] != byte(i) {
			t.Fatalf("datagram %d came back as %v", i, buf[:n])
		}
	}

	if relay.Sessions() != 1 {
		t.Fatalf("%d sessions, want 1", relay.Sessions())
	}
	if !WaitFor(t.Context(), 3*time.Second, func() bool { return relay.Sessions() == 0 }) {
		t.Fatal("the idle client's upstream socket was never closed")
	}
	// A client that comes back gets a fresh socket.
	latencyRoundTrip(t, c, "back")
}
