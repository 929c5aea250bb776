package engine

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// FuzzSubstitute checks, for two fuzzed rules and a fuzzed body, that the
// output does not depend on how the body is split into writes nor on the
// memo path (see pathMemo) nor on the prefilter (Teddy or the scalar
// scan), and that it equals the reference whenever the
// body is valid UTF-8 and nothing was dropped.
func FuzzSubstitute(f *testing.F) {
	f.Add("abcd|ab", "b", false, false, []byte("abcd ab"), uint8(2), uint8(0))
	f.Add(`\bfoo\b`, "o", true, true, []byte("foo foofoo"), uint8(1), uint8(3))
	f.Add(`(?i)straße`, `(?m)$`+"x", false, false, []byte("STRASSE Straße\nx"), uint8(5), uint8(0))
	f.Add(`(\w+)@(\w+)`, "@", false, true, []byte("a@b c@d"), uint8(3), uint8(4))
	f.Add(`a+`, "aa", true, false, []byte("aaaaaaa"), uint8(1), uint8(4))
	f.Add(`[^<]*<`, "é", false, false, []byte("héllo <b>"), uint8(7), uint8(2))
	// Matches of 5+ and 4+ bytes: the prefilter's anchor stage (stride 3, 2).
	f.Add(`rust[a-c]`, "https", true, false, []byte("rust rustc https rustb http"), uint8(5), uint8(0))
	f.Add(`\bwa+rn\b`, "abba", true, true, []byte("warn waarn abbabba wa rn"), uint8(3), uint8(0))
	// A literal that alone can match from its first three bytes is
	// compared at once (litOwner); here with and without a rival.
	f.Add(`ca[rt]+`, "rustc", true, false, []byte("rustc rust rustcc cart rus"), uint8(4), uint8(0))
	f.Add(`rus\b`, "rustc", true, true, []byte("rustc rus rustc\nrus"), uint8(2), uint8(6))
	// Bodies of 37 bytes and more: Teddy's 32-position blocks (with the
	// anchor check at offset 2, and at offset 0 for a 3-byte rule).
	f.Add(`warn(ing)?\b`, "rustc", true, false, []byte("a warning, rustc warned: rust warn rustcrustc warning rustc.warning"), uint8(40), uint8(0))
	f.Add(`v\d+\.\d`, "abc", true, true, []byte("v1.2 abc v10.3 ab abcabc v.1 v2.x xyzzy 0123456789 abc v9.9"), uint8(33), uint8(0))
	f.Fuzz(func(t *testing.T, p1, p2 string, lit2, first bool, body []byte, split, maxMatch uint8) {
		if len(p1) > 64 || len(p2) > 64 || len(body) > 512 {
			return
		}
		rules := []Rule{
			{Pattern: p1, Replacement: "<$0>"},
			{Pattern: p2, Literal: lit2, Replacement: "[$0]"},
		}
		prio := Longest
		if first {
			prio = First
		}
		s, err := Compile(rules, Options{Priority: prio, MaxMatch: int(maxMatch), MaxInstructions: 20000})
		if err != nil {
			return
		}
		whole, st, err := runGuard(s, guardNever, nil, body, nil)
		if err != nil {
			t.Fatal(err)
		}
		chunked, _, err := run(s, nil, body, []int{1 + int(split)%16, 1})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(whole, chunked) {
			t.Fatalf("chunked output %q differs from whole %q", chunked, whole)
		}
		plain, pst, err := runNoMemo(s, nil, body, []int{1 + int(split)%16, 1})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(whole, plain) || st.Dropped() != pst.Dropped() {
			t.Fatalf("output %q (%d dropped) differs from plain attempts %q (%d dropped)", whole, st.Dropped(), plain, pst.Dropped())
		}
		for _, chunks := range [][]int{nil, {1 + int(split)%16, 1}} {
			guarded, _, err := runGuard(s, guardAlways, nil, body, chunks)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(whole, guarded) {
				t.Fatalf("output %q differs with the guard on (chunks %v): %q", whole, chunks, guarded)
			}
		}
		if s.pre.teddy != nil {
			s.pre.teddy = nil // the scalar scan
			scalar, sst, err := run(s, nil, body, []int{1 + int(split)%16, 1})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(whole, scalar) || st.Dropped() != sst.Dropped() {
				t.Fatalf("output %q (%d dropped) differs from the scalar scan's %q (%d dropped)", whole, st.Dropped(), scalar, sst.Dropped())
			}
		}
		if st.Dropped() == 0 && utf8.Valid(body) && (!lit2 || utf8.ValidString(p2)) {
			if want := reference(rules, prio, nil, body); !bytes.Equal(whole, want) {
				t.Fatalf("got %q, reference %q", whole, want)
			}
		}
	})
}
