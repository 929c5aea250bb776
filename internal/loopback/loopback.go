// Package loopback gives each test a loopback address of its own, in
// 127.0.0.0/8, that no other test of this or any other process on the machine
// uses at the same time.
//
// Caddy listens with SO_REUSEPORT, so two processes listening on one address
// and port silently share its connections: a port found free by probing and
// then taken by another process's Caddy is not an error, only another
// server's answers. An address of one's own makes that impossible: a test
// claims one by listening, without SO_REUSEPORT, on ClaimPort of that
// address, and holds the listener until the test ends. A second claim of the
// same address, from any process, fails to bind and picks another address.
//
// Linux routes all of 127.0.0.0/8 to the loopback interface; connections to
// a claimed address come from 127.0.0.1 (the route's preferred source), so
// servers on it see their clients as 127.0.0.1 as before.
//
// It is for tests only.
package loopback

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"syscall"
	"testing"
)

// ClaimPort is the TCP port whose listener on an address marks the address
// as taken. It lies below the range FreePort-style probing uses (20000 and
// up) and below the kernel's ephemeral ports, so nothing of the tests' own
// binds it by chance.
const ClaimPort = 19387

// Claim claims a random address in 127.0.0.0/8 outside 127.0.0.0/24 (which
// holds 127.0.0.1 and the addresses tests use as distinct callers), holds it
// until t ends and returns it ("127.a.b.c").
func Claim(t testing.TB) string {
	t.Helper()
	return claimFrom(t, random)
}

// random is a random candidate address for Claim: 127.a.b.c with a and c
// in 1..254, so never in 127.0.0.0/24 nor the broadcast 127.255.255.255.
func random() netip.Addr {
	return netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(254)), byte(rand.IntN(256)), byte(1 + rand.IntN(254))})
}

// claimFrom is Claim with the candidates next returns, tried in turn until
// one can be claimed (bounded: a machine where 64 random addresses are all
// taken is broken, not busy).
func claimFrom(t testing.TB, next func() netip.Addr) string {
	t.Helper()
	var errs []error
	for range 64 {
		addr := next()
		l, err := claim(addr)
		if err == nil {
			t.Cleanup(func() { l.Close() })
			return addr.String()
		}
		errs = append(errs, err)
		if !errors.Is(err, syscall.EADDRINUSE) {
			break // not a claim of another test: trying others will not help
		}
	}
	t.Fatalf("loopback: no address of 127.0.0.0/8 could be claimed (this needs Linux, which routes all of 127/8 to lo, and port %d free on the wildcard address): %v", ClaimPort, errors.Join(errs...))
	return ""
}

// claim binds addr's ClaimPort. Go's listeners set SO_REUSEADDR but never
// SO_REUSEPORT, so a second bind of the same address and port fails while
// this one listens.
func claim(addr netip.Addr) (net.Listener, error) {
	l, err := net.Listen("tcp4", net.JoinHostPort(addr.String(), strconv.Itoa(ClaimPort)))
	if err != nil {
		return nil, fmt.Errorf("claiming %s: %w", addr, err)
	}
	return l, nil
}

// FreePort returns a port of host (a claimed address) free for TCP and UDP a
// moment ago. On an address of one's own only a listener on the wildcard
// address can hold a port, so this avoids those; it is chosen in 20000 up to
// the kernel's ephemeral range.
func FreePort(t testing.TB, host string) int {
	t.Helper()
	return FreePorts(t, host, 1)[0]
}

// FreePorts returns n distinct ports of host, each as FreePort's. Probing
// cannot see a port already handed out and not yet bound, so ports picked one
// by one for one server may repeat: a Caddy given the same port for HTTP and
// admin binds both (SO_REUSEPORT) and its admin endpoint answers site
// requests.
func FreePorts(t testing.TB, host string, n int) []int {
	t.Helper()
	return freePortsFrom(t, host, n, func() int { return 20000 + rand.IntN(12000) })
}

// freePortsFrom is FreePorts with the candidate ports next returns (bounded:
// 200 candidates a port).
func freePortsFrom(t testing.TB, host string, n int, next func() int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for try := 0; len(ports) < n && try < 200*n; try++ {
		if port := next(); port != ClaimPort && !slices.Contains(ports, port) && free(host, port) {
			ports = append(ports, port)
		}
	}
	if len(ports) == n {
		return ports
	}
	t.Fatalf("loopback: %d free ports on %s not found in %d tries (found %v)", n, host, 200*n, ports)
	return nil
}

// free reports whether host:port can be bound for TCP and UDP.
func free(host string, port int) bool {
	hp := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp4", hp)
	if err != nil {
		return false
	}
	u, err := net.ListenPacket("udp4", hp)
	l.Close()
	if err != nil {
		return false
	}
	u.Close()
	return true
}
