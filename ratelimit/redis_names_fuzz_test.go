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
// untrusted) and whatever key_prefix is accepted, the Redis key's slot is
// decided by our tag alone: zones of a request with equal keys share a
// slot, neither a caller nor the prefix can choose the slot with braces, a
// name stays bounded, and it never holds a text key a caller sent.
func FuzzRedisNames(f *testing.F) {
	for _, s := range []string{"alice", "{alice}", "}{", "a{b}c", "{}", "", strings.Repeat("x", 300), "192.0.2.1", "2001:db8::1", "{throttle}", "\x00{\xff}", "Bearer sk_live_51H8"} {
		f.Add(s, "other", "throttle:")
	}
	for _, p := range []string{"{edge}:", "edge{", "}", "a{}b:", "edge:", ""} {
		f.Add("alice", "bob", p)
	}
	z := func(name string) *zone { return &zone{name: name, limit: newLimit(rate{n: 1, period: 1e9}, 0)} }
	f.Fuzz(func(t *testing.T, s, other, prefix string) {
		if checkKeyPrefix(prefix) != nil {
			if !strings.ContainsAny(prefix, "{}") {
				t.Fatalf("key_prefix %q refused without a brace", prefix)
			}
			return
		}
		b := &redisBackend{prefix: prefix}
		b.prepare([]*zone{z("a"), z("b"), z("c{x}}")}) // braces in a zone name come after the tag
		tmpl := keyTemplate{v4bits: 32, v6bits: 64}
		keys := []requestKey{tmpl.fromString(s), tmpl.fromString(s), tmpl.fromString(other)}
		var tags [3]tag
		names := b.names(keys, tags[:], make([]string, len(keys)))
		for i, n := range names {
			if !strings.HasPrefix(n, prefix+"{"+string(tags[i][:])+"}:") {
				t.Fatalf("name %q: not <prefix>{<tag>}:", n)
			}
			if got := clusterHashTag(n); got != string(tags[i][:]) {
				t.Fatalf("name %q hashes on %q, want the tag %s", n, got, tags[i][:])
			}
			zone := len([]string{"a", "b", "c{x}}"}[i])
			if len(n) > len(prefix)+len("{12345678}::#")+zone+64 && len(n) > len(prefix)+len("{12345678}::")+zone+len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128") {
				t.Fatalf("name of %d bytes for a key of %d", len(n), len(s))
			}
			if k := keys[i]; !k.isAddr && len(k.text) >= 3 && strings.Contains(n[len(prefix):], k.text) && !isHex(k.text) {
				t.Fatalf("name %q holds the key %q a caller sent", n, k.text)
			}
		}
		if tags[0] != tags[1] {
			t.Fatalf("equal keys %q got tags %s and %s", s, tags[0][:], tags[1][:])
		}
	})
}

// isHex is whether s could be part of a hash's hex (or a zone name: a-c).
func isHex(s string) bool {
	return strings.Trim(s, "0123456789abcdef:{}#") == ""
}
