package servertiming

import "unsafe"

// fieldValues holds a response's Server-Timing value built from b and,
// when tao is not empty, its Timing-Allow-Origin value, each as a
// one-element slice for the header map, in one allocation sized to b
// (string(b), []string{...} and []string{tao} would be three). The slices
// are capped at one element, so an append elsewhere copies them; nothing
// but the map refers to the bytes.
type fieldValues struct {
	st  []string
	tao *[1]string
}

// newFieldValues copies b into an allocation of about its size.
func newFieldValues(b []byte, tao string) fieldValues {
	switch n := len(b); {
	case n <= 48:
		return fieldValuesIn[[48]byte](b, tao)
	case n <= 112:
		return fieldValuesIn[[112]byte](b, tao)
	case n <= 240:
		return fieldValuesIn[[240]byte](b, tao)
	case n <= maxHeaderLen:
		return fieldValuesIn[[maxHeaderLen]byte](b, tao)
	}
	fv := fieldValues{st: []string{string(b)}}
	if tao != "" {
		fv.tao = &[1]string{tao}
	}
	return fv
}

// fieldValuesIn is newFieldValues with the bytes in an A, a byte array of
// at least len(b).
func fieldValuesIn[A any](b []byte, tao string) fieldValues {
	x := new(struct {
		v [2]string
		b A
	})
	dst := unsafe.Slice((*byte)(unsafe.Pointer(&x.b)), unsafe.Sizeof(x.b))
	x.v[0] = unsafe.String(unsafe.SliceData(dst), copy(dst, b))
	fv := fieldValues{st: x.v[0:1:1]}
	if tao != "" {
		x.v[1] = tao
		fv.tao = (*[1]string)(x.v[1:])
	}
	return fv
}
