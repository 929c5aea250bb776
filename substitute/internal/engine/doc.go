// Package engine is the streaming matcher behind the substitute handler: it
// finds the matches of many find-and-replace rules in a body written in
// chunks, and writes the body out with the matches replaced, in one pass.
// It is internal to substitute, free to change with the handler's needs.
//
// # API
//
// Compile turns a list of Rule into a Set, once per configuration. A Set is
// immutable and safe for concurrent use. Set.NewStream returns a Stream for
// one body: Write it the body in chunks of any size, then Close it; the
// substituted body goes to the io.Writer given to NewStream, and a Stream
// is reused for the next body with Reset. Vars resolves the {name}
// placeholders of replacements, once per stream. Stream.Matched tells
// which rules matched, and Stream.Dropped counts candidates given up at
// Options.MaxMatch.
//
// # Semantics
//
//   - A Rule is a literal (bytes, compared exactly) or a regexp in RE2
//     syntax (regexp/syntax with the Perl flags). Compile refuses, naming
//     the rule (1-based), patterns that do not parse, rules that can match
//     the empty string, replacements that name a missing group, and rule
//     sets larger than Options.MaxInstructions or too large for
//     Options.CacheSize.
//   - Matches do not overlap and are taken leftmost first. Among matches
//     that start at the same byte, Options.Priority decides: Longest (the
//     longest, then the rule declared first) or First (the rule declared
//     first, then leftmost-first inside its regexp, as Perl and nginx's
//     replace_filter). After a match the scan resumes at its end.
//   - The output is the same whatever the chunk boundaries, and the same as
//     matching the whole body at once, except for candidates longer than
//     Options.MaxMatch: a rule that could still match after MaxMatch bytes
//     is dropped at that position (Stream.Dropped counts it) and the others
//     still compete there. At most MaxMatch bytes (plus a 256-byte window)
//     are held back; everything that cannot be part of a match is written
//     before Write returns.
//   - ^ $ \A \z \b \B are decided with the byte before a candidate and the
//     byte after it, or the end of the body at Close. Invalid UTF-8 never
//     matches . or a class (regexp would read it as U+FFFD); such bytes
//     pass through untouched.
//   - A replacement writes text and {name} placeholders (a value is
//     inserted verbatim; an unknown name stays as written). In regexp rules
//     only, $1 $name ${name} $$ are read exactly as regexp.Expand reads
//     them ($1é names the group "1é"; write ${1}é); in a literal rule $ is
//     plain text. A group that took no part writes nothing; of groups that
//     share a name, the first that took part is used.
//   - A Once rule leaves the stream's active rules after its first match.
//   - Memory is bounded whatever the body: a Set's DFA cache by
//     Options.CacheSize (it is emptied and refilled when full, with the same
//     output; the guard's two scans, built only when a body first needs
//     them, have a cache of that size each), a Stream by MaxMatch plus about
//     4 KiB for a few hundred rules (TestStreamMemory), and, with its guard
//     on, by about twice MaxMatch plus 100 KiB (TestGuardedStreamMemory).
//   - Work per byte is bounded too, whatever the repeat counts: once the
//     attempts of a stream have read guardRatio (4) times the body, plus
//     64 KiB, every further byte costs one forward and about one backward
//     DFA transition, and attempts are made only where a match begins,
//     each cut short where no match event is left for it or where no
//     match the scans know of crosses (guard.go); none is made where the
//     scans alone show the match (one end in reach for a single rule
//     whose matches fit MaxMatch; for several rules, one end below the
//     first position no known match crosses, and the rule the backward
//     scan kept at the start: guard.decided).
//     What remains per match is the match's own cost, like any scanner's:
//     its bytes, the replacement, and for a longest match the bytes its
//     rule still reads past it. BenchmarkWorstCase measures both beside Go's
//     regexp on bodies built against their rules; every body there runs
//     at 50 MB/s or more on one core (docs/benchmarks.md), the lowest
//     being those of matches 1000 or 2000 bytes long and of a match every
//     8 bytes among 13 rules (about 110 instructions a byte, 870 a match,
//     all costs included).
//   - Stream.Dropped counts rules given up at MaxMatch where an attempt
//     ran: with the guard on, positions where no match can begin, or
//     whose match the scans decide, get no attempt, and a rule alive
//     there is not counted.
//
// # Design
//
// Built like Go's regexp: a compiler (compile.go, nfa.go) turns the rules
// into one byte-level NFA with an entry point and a match instruction per
// rule; a lazy DFA (dfa.go) runs it for all rules at once; a prefilter
// (prefilter.go, teddy.go) skips to the positions where a match may start;
// a Stream (stream.go) runs anchored attempts from those positions, and a
// path memo (pathmemo.go) bounds the work of overlapping attempts; when
// attempts still read too much (bounded repeats, whose attempts never meet
// in one state), a guard (guard.go) takes over for the rest of the body: a
// forward scan finds where matches can end and a backward scan where they
// can begin, each run once over the body, and only those positions get an
// attempt; capture
// groups are computed only for rules whose replacement uses them, after the
// match is known (submatch.go), and replacements are parsed once
// (template.go, replace.go). Each file's notes explain its part; figures
// live in the benchmarks (bench_test.go).
package engine
