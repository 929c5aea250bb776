// Package engine is the streaming matcher behind the substitute handler: it
// finds the matches of many find-and-replace rules in a body written in
// chunks, and writes the body out with the matches replaced.
//
// It is built like Go's regexp package: a compiler turns the rules into a
// program, and a matcher runs it.
//
// # Compiler
//
// Each rule is parsed by regexp/syntax (literal rules are taken as bytes),
// simplified, and compiled into one byte-level NFA with an entry point and
// a match instruction per rule (nfa.go). Runes become the byte sequences of
// their UTF-8 encodings (the usual split of rune ranges into byte ranges),
// shared through a small trie so that \pL is not hundreds of threads; (?i)
// becomes each rune's case-folding orbit; ^ $ \A \z \b \B stay zero-width
// instructions. Invalid UTF-8 in a body never matches . or a class (Go's
// regexp would read it as U+FFFD); such bytes pass through untouched.
// Compile refuses, naming the rule, patterns that do not parse, rules that
// can match the empty string, replacements that name a missing group, and
// rule sets larger than Options.MaxInstructions.
//
// # Matcher
//
// The NFA runs as a lazy DFA (dfa.go): a state is the ordered list of NFA
// threads waiting for the next byte plus what the previous byte was (start,
// '\n', word byte, other). Zero-width assertions are decided when the next
// byte, or the end of the body, is known, so a match is seen one byte late
// and $, \z and \b are right at chunk boundaries and at the end. A
// transition records the rule whose match ended before the byte: the lowest
// numbered rule under Longest; under First, the threads are in priority
// order (declaration order, then leftmost-first inside a regexp) and a match
// cuts the threads below it, as in a Pike VM. States are built on demand
// and cached in a table shared by every stream of a Set (transitions are
// read with atomic loads, built under a mutex). The cache is bounded by
// Options.CacheSize; when it is full it is emptied and refilled on demand
// (RE2's policy), which keeps memory bounded and output unchanged: in the
// worst case each byte pays for building a state, like one Pike VM step.
// Set.CacheResets counts these resets.
//
// # Scanner
//
// A stream (stream.go) looks for positions where a match can start with a
// prefilter built from the DFA at compile time: a table of the byte pairs
// that can begin a match (or complete a one-byte match), tested seven pairs
// per 8-byte load against a copy folded to 32 KiB so it stays in L1, with
// hits confirmed by a hashed table of byte triples. When every match is at
// least 4 or 5 bytes long (the shortest rule decides, from its syntax), a
// first stage skips ahead: every match then holds, at some offset below the
// stride k (2 or 3), a triple that the DFA allows there, so testing one
// position in k against a 32 KiB hashed table of those triples finds every
// match. The table keeps, per triple, the offsets it occurs at, so a hit at
// position a sends only the starts a-offset on to the pair and triple tests
// (about 17,000 per MB of the HTML sample instead of 37,000). Rules with
// wide classes (such as [^"]) allow too many triples; they keep k = 1.
//
// Where the CPU has AVX2 (amd64, unless built with the purego tag), both
// stages give way to Teddy (teddy.go, from Hyperscan by way of Rust's
// aho-corasick), if the rules suit it: the triples that can begin a match
// are merged into eight buckets, each a set of low and high nibbles per
// byte, and 32 positions are tested at once with vector byte shuffles
// (teddy_amd64.s), about 12 GB/s on the HTML sample; what passes is
// confirmed by the pair and triple tables and, with a stride k > 1, by the
// anchor table at offset k-1. Rules whose buckets would pass more than 1%
// of a text body (wide first classes, such as \w+@) keep the scalar scan.
// With the 10 rules of BenchmarkWrkRules the scan starts about 1,300
// attempts per MB of the HTML sample (2,200 with the scalar scan; counted
// only by a build with the enginestats tag: go test -tags enginestats).
//
// A candidate whose first three bytes are those of a literal rule that,
// from there, alone can match (no other rule's thread left, no shorter
// match) is decided by comparing the literal with the text (about half the
// candidates there). From each other candidate the DFA runs
// anchored, for every active rule at once, until it dies, until MaxMatch+1
// bytes have been read, or until the input runs out, in which case the
// attempt is kept (its state and at most MaxMatch bytes) and resumed by the
// next Write. The attempt's best match wins: the leftmost, since candidates
// are tried in order, then the longest and the first declared (Longest), or
// the first declared and leftmost-first (First). The bytes before it are
// written out unchanged in one Write, the replacement follows, and scanning
// resumes after the match. A failed attempt resumes the scan one byte after
// its start, so the next attempts may read again the bytes it read: a
// pattern like <a [^>]*> over "<a <a <a ..." would read MaxMatch bytes per
// candidate. To bound that, the stream keeps the path of the attempt run
// furthest so far (its DFA state at each of the next 128 positions and, as
// far as it was run, every stride positions, where stride is 64 or
// MaxMatch/64 rounded up to a power of two if larger; where it stopped, its
// state there and its last match), and a running attempt compares its state
// with the path at every byte. Two attempts in the same state at the same
// position go on identically, so once they agree the attempt takes the
// path's match events and jumps to where the path stopped, and runs on from
// there to its own MaxMatch limit (see pathMemo in stream.go). Each position
// is then run over a bounded number of times whatever MaxMatch, as long as
// attempts join the path within 128 bytes: on "<a <a <a ..." after 3 bytes,
// so a hostile body runs at tens of MB/s (BenchmarkWorstCase). Attempts
// whose states stay apart longer, as with a bounded repetition like
// a{1,100}b over "aaaa...", each pay until their states meet (about 100
// bytes there), plus up to a stride if that is past the first 128.
//
// A rule still able to grow after MaxMatch bytes is dropped at that
// position (Stream.Dropped counts it) and the attempt is run again without
// it, so other rules still compete there. A once rule leaves the active set
// after its first match; the start states for a reduced set of rules (once,
// Stream.Restrict) are interned in the same cache.
//
// Replacement templates are parsed once: text, {placeholder} variables
// resolved through Vars once per stream, and, in regex rules only, $1
// ${name} $$ read exactly as regexp.Expand reads them ($1é names the group
// "1é"; write ${1}é). A literal rule's $ is plain text. Capture groups are computed only for rules whose
// replacement uses them, after the match is known, over the rune program
// (submatch.go): those of the leftmost-first parse of the matched text, by a
// pooled backtracker that compares runs of literal bytes at once (a Pike VM
// for long matches).
//
// A Set is immutable and safe for concurrent use. A Stream holds its
// attempt's bytes (at most MaxMatch plus a 256-byte window), two rings of
// 128 states and two of at most 66 for the memo path and a few words per
// rule, in all less than MaxMatch + 4 KiB for up to a few hundred rules
// (TestStreamMemory); it is reused with Reset and allocates nothing per
// Write in steady state.
package engine
