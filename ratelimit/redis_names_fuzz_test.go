package ratelimit

import (
	"strings"
	"testing"
)

// clusterHashTag is the part of a key Redis Cluster hashes for its slot:
// the text between the first { and the first } after it, if not empty;
// else the whole key.
func clusterHashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// FuzzRedisNames: whatever a caller sends as its key (headers are
// untrusted), the Redis key's slot is decided by our tag alone: zones of a
// request with equal keys share a slot, a caller cannot choose its slot
// with braces, and a name stays bounded.
func FuzzRedisNames(f *testing.F) {
	for _, s := range []string{"alice", "{alice}", "}{", "a{b}c", "{}", "", strings.Repeat("x", 300), "192.0.2.1", "2001:db8::1", "{throttle}", "\x00{\xff}"} {
		f.Add(s, "other")
	}
	b := &redisBackend{prefix: "throttle:"}
	z := func(name string) *zone { return &zone{name: name, limit: newLimit(rate{n: 1, period: 1e9}, 0)} }
	b.prepare([]*zone{z("a"), z("b"), z("c")})
	f.Fuzz(func(t *testing.T, s, other string) {
		tmpl := keyTemplate{v4bits: 32, v6bits: 64}
		keys := []requestKey{tmpl.fromString(s), tmpl.fromString(s), tmpl.fromString(other)}
		var tags [3]tag
		names := b.names(keys, tags[:])
		for i, n := range names {
			if !strings.HasPrefix(n, "throttle:{"+string(tags[i][:])+"}:") {
				t.Fatalf("name %q: not <prefix>{<tag>}:", n)
			}
			if got := clusterHashTag(n); got != string(tags[i][:]) {
				t.Fatalf("name %q hashes on %q, want the tag %s", n, got, tags[i][:])
			}
			if len(n) > len("throttle:{12345678}:a:#")+64 && len(n) > len("throttle:{12345678}:a:=")+maxRedisKeyLen {
				t.Fatalf("name of %d bytes for a key of %d", len(n), len(s))
			}
		}
		if tags[0] != tags[1] {
			t.Fatalf("equal keys %q got tags %s and %s", s, tags[0][:], tags[1][:])
		}
	})
}
