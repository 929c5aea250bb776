// Package enum parses the string enumerations of edgekit's options (JSON and
// Caddyfile alike), one way for every module: a typed string constant per
// value, and one parse that names the values allowed when it refuses.
package enum

import (
	"fmt"
	"strings"
)

// Parse returns s as a T when it is one of values, and otherwise an error
// naming s and the values allowed (`"dry": must be enforce or observe`), for
// the caller to prefix with its module and option.
func Parse[T ~string](s string, values ...T) (T, error) {
	for _, v := range values {
		if s == string(v) {
			return v, nil
		}
	}
	return "", fmt.Errorf("%q: must be %s", s, alternatives(values))
}

// alternatives lists values as "a", "a or b", "a, b or c".
func alternatives[T ~string](values []T) string {
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = string(v)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
