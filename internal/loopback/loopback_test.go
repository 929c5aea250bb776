package loopback

import (
	"net"
	"net/netip"
	"slices"
	"strconv"
	"testing"
)

// TestClaimRefusedPicksAnother: an address whose claim port another process
// holds (here a plain listener, as another process's Claim would be) is
// refused, and the next candidate is claimed; a claimed address is refused
// to later claims until its test ends.
func TestClaimRefusedPicksAnother(t *testing.T) {
	taken, free, third := netip.MustParseAddr("127.201.7.9"), netip.MustParseAddr("127.201.7.10"), netip.MustParseAddr("127.201.7.11")
	other, err := net.Listen("tcp4", net.JoinHostPort(taken.String(), strconv.Itoa(ClaimPort)))
	if err != nil {
		t.Fatalf("simulating another process's claim: %v", err)
	}
	defer other.Close()

	// candidates fails the t it is given, the test that runs out: a
	// subtest must not fail its parent.
	candidates := func(t *testing.T, addrs ...netip.Addr) func() netip.Addr {
		return func() netip.Addr {
			if len(addrs) == 0 {
				t.Fatal("ran out of candidates")
			}
			a := addrs[0]
			addrs = addrs[1:]
			return a
		}
	}
	t.Run("claim", func(t *testing.T) {
		if got := claimFrom(t, candidates(t, taken, free)); got != free.String() {
			t.Fatalf("claimed %s, want %s: %s is another process's", got, free, taken)
		}
		if got := claimFrom(t, candidates(t, free, third)); got != third.String() {
			t.Fatalf("claimed %s again while held, want %s", got, third)
		}
	})
	// The subtest has ended: its claims are released.
	if got := claimFrom(t, candidates(t, free)); got != free.String() {
		t.Fatalf("claimed %s, want %s released by the ended test", got, free)
	}
}

// TestRandomStaysOutOf127_0_0: random candidates avoid 127.0.0.0/24
// (127.0.0.1, and the addresses tests dial from as distinct callers) and the
// broadcast address.
func TestRandomStaysOutOf127_0_0(t *testing.T) {
	low := netip.MustParsePrefix("127.0.0.0/24")
	for range 10000 {
		a := random()
		if !a.IsLoopback() || low.Contains(a) || a == netip.MustParseAddr("127.255.255.255") {
			t.Fatalf("candidate %s", a)
		}
	}
}

// TestFreePortsDistinct: a candidate already handed out in the same call is
// passed over, as are the claim port and a port something holds, so a
// server's ports never coincide (a Caddy given one port for HTTP and admin
// binds both, and its admin endpoint answers site requests).
func TestFreePortsDistinct(t *testing.T) {
	host := Claim(t)
	held, err := net.Listen("tcp4", net.JoinHostPort(host, "20007"))
	if err != nil {
		t.Fatalf("holding a port: %v", err)
	}
	defer held.Close()
	seq := []int{20001, 20001, ClaimPort, 20007, 20001, 20002, 20002, 20003}
	next := func() int {
		if len(seq) == 0 {
			t.Fatal("ran out of candidates")
		}
		p := seq[0]
		seq = seq[1:]
		return p
	}
	if got, want := freePortsFrom(t, host, 3, next), []int{20001, 20002, 20003}; !slices.Equal(got, want) {
		t.Fatalf("ports %v, want %v", got, want)
	}
	for range 200 {
		if p := FreePorts(t, host, 3); p[0] == p[1] || p[1] == p[2] || p[0] == p[2] {
			t.Fatalf("FreePorts gave %v", p)
		}
	}
}
