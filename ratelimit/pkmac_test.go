package ratelimit

import (
	"encoding/hex"
	"net/netip"
	"testing"
)

// TestPKMACIsCMAC: pkMAC gives RFC 4493's AES-CMAC values (its examples
// and SP 800-38B's 20-byte one), whatever the split of the message into
// head and tail, so every full and short last block and every way a block
// straddles the two is covered.
func TestPKMACIsCMAC(t *testing.T) {
	key, _ := hex.DecodeString("2b7e151628aed2a6abf7158809cf4f3c")
	m, err := newPKMAC(key)
	if err != nil {
		t.Fatal(err)
	}
	const msg = "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710"
	for _, tc := range []struct {
		n   int // message bytes, a prefix of msg
		mac string
	}{
		{0, "bb1d6929e95937287fa37d129b756746"},
		{16, "070a16b46b4d4144f79bdd9dd04a287c"},
		{20, "7d85449ea6ea19c823a7bf78837dfade"},
		{40, "dfa66747de9ae63030ca32611497c827"},
		{64, "51f0bebf7e3b9d92fc49741779363cfe"},
	} {
		full, _ := hex.DecodeString(msg[:2*tc.n])
		for split := 0; split <= tc.n; split++ {
			var x macScratch
			if got := hex.EncodeToString(m.sum(&x, full[:split], string(full[split:]))[:]); got != tc.mac {
				t.Errorf("%d bytes split at %d: CMAC %s, want %s", tc.n, split, got, tc.mac)
			}
		}
	}
	if _, err := newPKMAC(key[:15]); err == nil {
		t.Error("a 15-byte key was taken")
	}
}

// TestPKIsStableAndApart: one key has one pk; keys that differ in any part
// of their canonical bytes (the address, the prefix length, text against
// address, text against a peer name) have different ones.
func TestPKIsStableAndApart(t *testing.T) {
	addr := func(p string) requestKey { return requestKey{isAddr: true, addr: netip.MustParsePrefix(p)} }
	keys := []requestKey{
		addr("192.0.2.1/32"), addr("192.0.2.0/24"), addr("192.0.2.2/32"), addr("2001:db8::/64"), addr("2001:db8::/48"),
		{text: "192.0.2.1"}, {text: "192.0.2.1", peer: true}, {text: ""}, {text: "a key longer than one sixteen-byte block"},
	}
	seen := map[[pkSize]byte]int{}
	for i, k := range keys {
		pk := k.pk()
		if again := k.pk(); again != pk {
			t.Fatalf("key %d: pk %x then %x", i, pk, again)
		}
		if j, dup := seen[pk]; dup {
			t.Fatalf("keys %d and %d share pk %x", j, i, pk)
		}
		seen[pk] = i
	}
}

func BenchmarkPK(b *testing.B) {
	for _, bc := range []struct {
		name string
		key  requestKey
	}{
		{"address", requestKey{isAddr: true, addr: netip.MustParsePrefix("2001:db8::/64")}},
		{"text-40", requestKey{text: "0123456789abcdef0123456789abcdef01234567"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = bc.key.pk()
			}
		})
	}
}
