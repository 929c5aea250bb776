package ratelimit

import (
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"time"

	"github.com/caddy-edgekit/edgekit/internal/fieldvalue"
)

// The RateLimit-Policy and RateLimit fields follow
// draft-ietf-httpapi-ratelimit-headers-10: each is an RFC 9651 List with one
// Item per zone, the zone's name as an sf-string,
//
//	RateLimit-Policy: "<zone>";q=<quota>;w=<seconds>;pk=:<base64>:
//	RateLimit:        "<zone>";r=<remaining>;t=<seconds>;pk=:<base64>:
//
// pk, the partition key, is a Byte Sequence naming the caller's budget:
// a keyed hash of the key, never the key itself.

// announce is the quota q and the whole-second window w a zone announces.
// r (remaining) never exceeds burst+1, the most a caller may send at once,
// so q is at least that: the larger of the rate over its window (rounded
// down, so it never promises more than the rate allows) and the burst, the
// window then being the time GCRA takes to refill the whole burst.
func announce(r rate, burst int64) (q, w int64) {
	q, w = r.policyWindow()
	if burst+1 > q {
		q = burst + 1
		w = ceilSeconds(time.Duration(satMul(burst+1, r.interval())))
	}
	return q, w
}

// policyItem is a zone's RateLimit-Policy list member without its pk: its
// name as an sf-string, quota q and window w in seconds.
func policyItem(name string, r rate, burst int64) string {
	q, w := announce(r, burst)
	return sfString(name) + ";q=" + strconv.FormatInt(q, 10) + ";w=" + strconv.FormatInt(w, 10)
}

// slotsPolicyItem is a concurrent zone's RateLimit-Policy member without
// its pk: quota n in the draft's quota unit for requests in flight, and no
// window (a slot is free again when a request ends, not after a time).
func slotsPolicyItem(name string, n int64) string {
	return sfString(name) + ";q=" + strconv.FormatInt(n, 10) + `;qu="concurrent-requests"`
}

// appendState appends a zone's RateLimit list member without its pk: r
// requests allowed right now, t seconds until the next one is. A
// concurrent zone has r, its free slots, and no t: when one frees is up
// to the requests in flight.
func appendState(b []byte, z *zone, o outcome) []byte {
	if z.slots > 0 {
		b = append(b, z.quoted...)
		b = append(b, ";r="...)
		return strconv.AppendInt(b, max(0, z.slots-o.after), 10)
	}
	b = append(b, z.quoted...)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, z.limit.remaining(o), 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, ceilSeconds(z.limit.wait(o)), 10)
}

// pkSize is how many bytes of the HMAC the partition key keeps: 96 bits,
// 16 characters of base64.
const pkSize = 12

// pkSecret keys the partition key's MAC. It is random per process, so a pk
// cannot be turned back into the key (an IPv4 address is 32 bits: an
// unkeyed hash would be reversed by trying them all) and is stable while the
// process runs, across reloads.
var pkSecret = func() *pkMAC {
	key := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		panic("throttle: no randomness for the partition key secret: " + err.Error())
	}
	m, err := newPKMAC(key)
	if err != nil {
		panic("throttle: " + err.Error())
	}
	return m
}()

// pk is the partition key of rk: the AES-CMAC of the key's canonical bytes
// (an address prefix, the key text or a peer that is no IP, told apart by
// the first byte), truncated to pkSize bytes.
func (rk requestKey) pk() (out [pkSize]byte) {
	x := macScratches.Get().(*macScratch)
	var head []byte
	if rk.isAddr {
		a := rk.addr.Addr().As16()
		x.head[0] = 'a'
		copy(x.head[1:], a[:])
		x.head[17] = byte(rk.addr.Bits())
		head = x.head[:18]
	} else {
		x.head[0] = 't'
		if rk.peer {
			x.head[0] = 'p'
		}
		head = x.head[:1]
	}
	tail := ""
	if !rk.isAddr {
		tail = rk.text
	}
	copy(out[:], pkSecret.sum(x, head, tail)[:])
	macScratches.Put(x)
	return out
}

// pkString is the partition key as logs show it: the pk parameter's
// base64, without the colons.
func (rk requestKey) pkString() string {
	pk := rk.pk()
	return base64.StdEncoding.EncodeToString(pk[:])
}

// pkParamSize is the length of the pk parameter, `;pk=:<base64>:`.
const pkParamSize = len(";pk=:") + (pkSize+2)/3*4 + len(":")

// writePKParam writes the pk parameter of pk into dst: `;pk=:<base64>:`.
func writePKParam(dst *[pkParamSize]byte, pk *[pkSize]byte) {
	n := copy(dst[:], ";pk=:")
	base64.StdEncoding.Encode(dst[n:], pk[:])
	dst[pkParamSize-1] = ':'
}

// fieldBytes is the most newFieldValues puts in one allocation.
const fieldBytes = fieldvalue.Max

// newFieldValues is b cut at policyLen into the two values, with the
// two-element array both fields' slices cut, in one allocation while b
// fits fieldBytes, else two.
func newFieldValues(b []byte, policyLen int) *[2]string {
	vals, both := fieldvalue.Pair(b)
	*vals = [2]string{both[:policyLen], both[policyLen:]}
	return vals
}

// sfString quotes s as an RFC 9651 sf-string; zone names are printable
// ASCII, anything else is dropped.
func sfString(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20 && c < 0x7f:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}
