package servertiming

import "github.com/caddy-edgekit/edgekit/internal/fieldvalue"

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

// newFieldValues copies b into an allocation of about its size (see
// fieldvalue.Pair), tao's slot beside it.
func newFieldValues(b []byte, tao string) fieldValues {
	v, st := fieldvalue.Pair(b)
	v[0] = st
	fv := fieldValues{st: v[0:1:1]}
	if tao != "" {
		v[1] = tao
		fv.tao = (*[1]string)(v[1:])
	}
	return fv
}
