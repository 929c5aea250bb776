package servertiming

import (
	"net/http"
	"unsafe"

	"github.com/caddy-edgekit/edgekit/internal/fieldvalue"
)

// fieldValues holds a response's Server-Timing value built from b and,
// when tao is not empty, its Timing-Allow-Origin value, each as a
// one-element slice for the header map, in one allocation sized to b
// (string(b), []string{...} and []string{tao} would be three), or in no
// new allocation at all when the request's traced copy has room (see
// fieldSlot). The slices are capped at one element, so an append
// elsewhere copies them; nothing but the map refers to the bytes.
type fieldValues struct {
	st  []string
	tao *[1]string
}

// inlineFieldLen is how many bytes of entries fit in a fieldSlot: what
// brings tracedRequest to 576 bytes with the 8-byte header Go's allocator
// puts before an object over 512 bytes that holds pointers, exactly one
// of its size classes (TestTracedRequestFillsItsSizeClass). A header with
// every entry is about 180 bytes; a longer one (durations of hours)
// takes an allocation of its own.
const inlineFieldLen = int(576 - mallocHeader - unsafe.Sizeof(http.Request{}) - unsafe.Sizeof(traceContext{}) - unsafe.Sizeof([2]string{}))

// mallocHeader is the type header of a large-enough object with pointers.
const mallocHeader = 8

// fieldSlot is room for one response's header values inside the
// allocation the request makes anyway, its traced copy: the header
// values then cost no allocation of their own. Written once (vals[0] is
// the Server-Timing value, never empty, once taken) and never again:
// the strings are immutable, and they keep the whole copy alive for as
// long as the header map holds them, about the request's lifetime.
type fieldSlot struct {
	vals [2]string
	b    [inlineFieldLen]byte
}

// newFieldValues copies b into slot when it is there, not yet taken and b
// fits, else into an allocation of about b's size (see fieldvalue.Pair),
// tao's slot beside it.
func newFieldValues(slot *fieldSlot, b []byte, tao string) fieldValues {
	var v *[2]string
	if slot != nil && slot.vals[0] == "" && len(b) > 0 && len(b) <= len(slot.b) {
		v = &slot.vals
		v[0] = unsafe.String(&slot.b[0], copy(slot.b[:], b))
	} else {
		var st string
		v, st = fieldvalue.Pair(b)
		v[0] = st
	}
	fv := fieldValues{st: v[0:1:1]}
	if tao != "" {
		v[1] = tao
		fv.tao = (*[1]string)(v[1:])
	}
	return fv
}
