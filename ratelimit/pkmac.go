package ratelimit

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"sync"
)

// pkMAC is AES-CMAC (RFC 4493, NIST SP 800-38B) with a 128-bit key: the
// pseudo-random function behind the partition key. It replaced
// HMAC-SHA256, a third of throttle's handler time (four SHA-256 blocks for
// an 18-byte key, against two AES blocks here, each one AES-NI pass where
// the CPU has it). Either is a PRF under a secret key, which is all pk asks
// for: the same key gives the same pk, and without the secret a pk tells
// nothing of its key, an IPv4 address included.
//
// The block cipher is safe for concurrent use; the chaining value and the
// block being filled live in a pooled macScratch, so a sum allocates
// nothing (arrays on the stack would escape through cipher.Block's
// interface).
type pkMAC struct {
	block  cipher.Block
	k1, k2 [aes.BlockSize]byte // the subkeys for a full and a padded last block
}

type macScratch struct {
	state, blk [aes.BlockSize]byte
	head       [aes.BlockSize + 2]byte // room for the 18 bytes of an address key
}

var macScratches = sync.Pool{New: func() any { return new(macScratch) }}

// newPKMAC keys a pkMAC with a 16-byte key.
func newPKMAC(key []byte) (*pkMAC, error) {
	if len(key) != 16 {
		return nil, fmt.Errorf("partition key MAC: key of %d bytes, want 16", len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("partition key MAC: %v", err)
	}
	m := &pkMAC{block: b}
	var l [aes.BlockSize]byte
	b.Encrypt(l[:], l[:])
	m.k1 = double(l)
	m.k2 = double(m.k1)
	return m, nil
}

// double is multiplication by x in GF(2^128) with the polynomial
// x^128 + x^7 + x^2 + x + 1: a left shift, folding the carry back as 0x87.
func double(in [aes.BlockSize]byte) (out [aes.BlockSize]byte) {
	carry := in[0] >> 7
	for i := 0; i < aes.BlockSize-1; i++ {
		out[i] = in[i]<<1 | in[i+1]>>7
	}
	out[aes.BlockSize-1] = in[aes.BlockSize-1]<<1 ^ 0x87*carry
	return out
}

// sum is the CMAC of head followed by tail, in x (the result in x.state).
func (m *pkMAC) sum(x *macScratch, head []byte, tail string) *[aes.BlockSize]byte {
	x.state = [aes.BlockSize]byte{}
	total, pos, n := len(head)+len(tail), 0, 0
	for {
		n = fill(&x.blk, head, tail, pos)
		pos += n
		if pos == total {
			break
		}
		xorInto(&x.state, &x.blk)
		m.block.Encrypt(x.state[:], x.state[:])
	}
	// The last block (an empty message's too): whole, it is masked with
	// k1; short, padded with 10…0 and masked with k2.
	if n == aes.BlockSize {
		xorInto(&x.blk, &m.k1)
	} else {
		x.blk[n] = 0x80
		clear(x.blk[n+1:])
		xorInto(&x.blk, &m.k2)
	}
	xorInto(&x.state, &x.blk)
	m.block.Encrypt(x.state[:], x.state[:])
	return &x.state
}

// fill copies the next block of head+tail from pos into blk and says how
// many bytes it copied.
func fill(blk *[aes.BlockSize]byte, head []byte, tail string, pos int) int {
	n := 0
	if pos < len(head) {
		n = copy(blk[:], head[pos:])
		pos += n
	}
	if n < aes.BlockSize {
		n += copy(blk[n:], tail[pos-len(head):])
	}
	return n
}

func xorInto(dst, src *[aes.BlockSize]byte) {
	for i := range dst {
		dst[i] ^= src[i]
	}
}
