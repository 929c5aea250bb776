package loopback

import (
	"net"
	"net/netip"
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
