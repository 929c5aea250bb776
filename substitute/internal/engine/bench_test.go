package engine

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// benchRules returns n rules, literals and regexps mixed: the first ones
// rewrite things the sample bodies contain, the rest are site-specific
// rewrites that rarely match, as a real configuration would have.
func benchRules(n int) []Rule {
	rules := []Rule{
		lit("https://doc.rust-lang.org", "https://docs.example.org"),
		rx(`https?://github\.com/([\w-]+)`, "https://git.example.com/$1"),
		lit("function", "fn"),
		rx(`\bwarning\b`, "WARN"),
		lit("<table>", `<table class="t">`),
		rx(`(?i)copyright \d{4}`, "Copyright 2026"),
		lit("undefined", "void 0"),
		rx(`data-[a-z]+="[^"]*"`, ""),
		lit("https://llvm.org", "https://llvm.example.org"),
		rx(`\bv(\d+)\.(\d+)\.(\d+)\b`, "v$1.$2.x"),
	}
	for i := len(rules); len(rules) < n; i++ {
		switch i % 4 {
		case 0:
			rules = append(rules, lit(fmt.Sprintf("https://cdn%d.example.com/", i), "/static/"))
		case 1:
			rules = append(rules, rx(fmt.Sprintf(`\bcampaign%d-[0-9a-f]{8}\b`, i), "campaign"))
		case 2:
			rules = append(rules, lit(fmt.Sprintf("legacyWidget%d", i), "widget"))
		case 3:
			rules = append(rules, rx(fmt.Sprintf(`(?i)<script src="/old/v%d/[^"]*">`, i), `<script src="/new/">`))
		}
	}
	return rules[:n]
}

// combined is the Go regexp equivalent: one alternation of every rule.
func combined(rules []Rule) *regexp.Regexp {
	var parts []string
	for _, r := range rules {
		p := r.Pattern
		if r.Literal {
			p = regexp.QuoteMeta(p)
		}
		parts = append(parts, "(?:"+p+")")
	}
	re := regexp.MustCompile(strings.Join(parts, "|"))
	re.Longest()
	return re
}

var benchBodies = []struct{ name, file string }{
	{"html", "testdata/rustc-book.html"},
	{"js", "testdata/react-dom.development.js"},
}

// BenchmarkSubstitute prints MB/s for the engine (streamed in 32 KiB writes)
// and for Go's regexp (one combined pattern over the whole buffer), per body
// and rule count, plus allocations, per-stream memory and, built with the
// enginestats tag, prefilter attempts per MB.
func BenchmarkSubstitute(b *testing.B) {
	for _, body := range benchBodies {
		data, err := os.ReadFile(body.file)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1, 10, 50, 200} {
			rules := benchRules(n)
			b.Run(fmt.Sprintf("%s/rules=%d/engine", body.name, n), func(b *testing.B) {
				st := benchStream(b, mustCompile(b, rules, Options{}), data)
				b.ReportMetric(float64(st.memSize()), "stream-B")
			})
			b.Run(fmt.Sprintf("%s/rules=%d/regexp", body.name, n), func(b *testing.B) {
				re := combined(rules)
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				cpu0 := cpuTime()
				for range b.N {
					re.ReplaceAllLiteral(data, []byte("X"))
				}
				reportCPU(b, cpuTime()-cpu0, len(data))
			})
		}
	}
}

// cpuTime is the CPU time the process used so far. The machine the figures
// were taken on is shared, so MB/s per CPU second is reported next to the
// wall-clock MB/s.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, cpu time.Duration, size int) {
	if cpu > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/1e6/cpu.Seconds(), "cpu-MB/s")
	}
}

// benchStream streams data through a stream of s b.N times, after one run
// that warms the DFA cache, and reports CPU MB/s and, built with the
// enginestats tag, prefilter attempts per MB. It returns the stream.
func benchStream(b *testing.B, s *Set, data []byte) *Stream {
	st := s.NewStream(io.Discard, nil)
	streamOnce(st, data)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	attempts := 0
	cpu0 := cpuTime()
	for range b.N {
		st.Reset(io.Discard, nil)
		streamOnce(st, data)
		attempts += st.attempts.n()
	}
	reportCPU(b, cpuTime()-cpu0, len(data))
	if attemptsCounted {
		b.ReportMetric(float64(attempts)/float64(b.N)/(float64(len(data))/1e6), "attempts/MB")
	}
	return st
}

func streamOnce(st *Stream, data []byte) {
	for p := data; len(p) > 0; {
		n := min(len(p), 32<<10)
		st.Write(p[:n])
		p = p[n:]
	}
	st.Close()
}

// memSize is the memory a stream owns: the struct, its held-back buffer and
// its per-rule and per-placeholder tables.
func (st *Stream) memSize() int {
	n := int(unsafe.Sizeof(*st)) + cap(st.hold)
	n += 8 * (cap(st.active) + cap(st.matched) + cap(st.scratch))
	n += int(unsafe.Sizeof([]byte(nil)))*cap(st.varVals) + cap(st.varKnown) + 8*cap(st.idx) + int(unsafe.Sizeof((*state)(nil)))*(cap(st.memo.ring)+cap(st.memo.ownRing)+cap(st.memo.sparse)+cap(st.memo.ownSparse))
	for _, v := range st.varVals {
		n += cap(v)
	}
	if g := st.guard; g != nil {
		n += int(unsafe.Sizeof(*g)) + 8*(cap(g.ends)+cap(g.marks)+cap(g.crossed)+cap(g.revPos)+cap(g.revAt))
	}
	return n
}

// TestStreamMemory: a stream holds at most MaxMatch + 4 KiB, with 200 rules.
func TestStreamMemory(t *testing.T) {
	for _, maxMatch := range []int{1 << 10, DefaultMaxMatch, 1 << 20} {
		s := mustCompile(t, benchRules(200), Options{MaxMatch: maxMatch})
		st := s.NewStream(io.Discard, nil)
		data, err := os.ReadFile("testdata/rustc-book.html")
		if err != nil {
			t.Fatal(err)
		}
		streamOnce(st, data[:256<<10])
		if got := st.memSize(); got > maxMatch+4096 {
			t.Errorf("max_match %d: stream owns %d bytes, want <= %d", maxMatch, got, maxMatch+4096)
		}
	}
}

// TestSteadyStateAllocs: writing a body through a warmed, reused stream
// allocates nothing.
func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	data, err := os.ReadFile("testdata/rustc-book.html")
	if err != nil {
		t.Fatal(err)
	}
	s := mustCompile(t, benchRules(10), Options{})
	st := s.NewStream(io.Discard, nil)
	streamOnce(st, data)
	allocs := testing.AllocsPerRun(3, func() {
		st.Reset(io.Discard, nil)
		streamOnce(st, data)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per body, want 0", allocs)
	}
}

// hostileCase is a body built to make a scanner re-read bytes, with its
// rules.
type hostileCase struct {
	name  string
	rules []Rule
	body  []byte
}

// hostileCases are bodies built against their rules: every position
// starts a candidate that stays alive for MaxMatch bytes or for a long
// bounded repetition, alone or among the usual rules, and some bodies hold
// a match now and then, so that the scans cannot just pass. Each body is
// about 256 KiB.
func hostileCases() []hostileCase {
	const size = 256 << 10
	fill := func(unit string) []byte { return []byte(strings.Repeat(unit, size/len(unit))) }
	every := func(unit string, n int, end string) []byte {
		return fill(strings.Repeat(unit, n) + end)
	}
	mixed := append(benchRules(10), rx(`<a [^>]*>`, "A"), lit("<a", "B"), rx(`a{1,100}b|a+c`, "C"))
	var many []Rule
	for i := range 50 {
		many = append(many, rx(fmt.Sprintf(`[0-9a-f]{8,100}%c`, 'g'+i%20)+fmt.Sprintf("%d", i), "H"))
	}
	const (
		email = `[\w.+-]+@[\w-]+\.[\w.]+`
		uuid  = `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`
		url   = `https?://[a-z0-9.-]{1,253}/[^\s"]{0,1000}"`
		img   = `<img [^>]{0,1000}src="[^"]{0,500}"`
	)
	return []hostileCase{
		{"tags", []Rule{rx(`<a [^>]*>`, "")}, fill("<a ")},
		{"repeat 10", []Rule{rx(`a{1,10}b`, "")}, fill("a")},
		{"repeat 100", []Rule{rx(`a{1,100}b`, "")}, fill("a")},
		{"repeat 1000", []Rule{rx(`a{1,1000}b`, "")}, fill("a")},
		{"repeat 1000 matching", []Rule{rx(`a{1,1000}b`, "")}, every("a", 2000, "b")},
		{"dot 10", []Rule{rx(`a.{0,10}z`, "")}, fill("ab")},
		{"dot 500", []Rule{rx(`a.{0,500}z`, "")}, fill("ab")},
		{"dot 500 matching", []Rule{rx(`a.{0,500}z`, "")}, every("ab", 1000, "z")},
		{"nested", []Rule{rx(`(?:a{1,10}){1,10}b`, "")}, fill("a")},
		{"alternated", []Rule{rx(`a{1,100}b|a+c`, "")}, fill("a")},
		{"alternated groups", []Rule{rx(`(?:a|ab){1,50}c`, "")}, fill("ab")},
		{"class in class", []Rule{rx(`[a-z]{1,100}[0-9]`, "")}, fill("abcdefghij")},
		{"word run", []Rule{rx(`\w{3,64}=`, "")}, fill("w")},
		{"50 repeats", many, fill("0123456789abcdef")},
		{"email", []Rule{rx(email, "")}, fill("a")},
		{"email matching", []Rule{rx(email, "")}, every("a", 1000, "@b.c ")},
		{"email ats", []Rule{rx(email, "")}, fill("a@")},
		{"uuid", []Rule{rx(uuid, "")}, fill("0123abcd-")},
		{"url", []Rule{rx(url, "")}, fill("https://x/")},
		{"img", []Rule{rx(img, "")}, fill("<img ")},
		{"counter", []Rule{rx(`a{1,100}b|a+c`, "")}, fill("a")},
		{"mixed", mixed, fill("<a aaaa ")},
		{"dense literal", []Rule{lit("<a", "B")}, fill("<a aaaa ")},
	}
}

// BenchmarkWorstCase prints MB/s on the hostile bodies, for the engine,
// for the engine with its guard off (attempts alone), and, on the same
// body in the same run, for Go's regexp (one alternation of the rules,
// leftmost-longest, ReplaceAll): the engine's work must stay proportional
// to the body, whatever the repeat counts and MaxMatch.
func BenchmarkWorstCase(b *testing.B) {
	for _, hc := range hostileCases() {
		for _, maxMatch := range []int{1 << 10, DefaultMaxMatch} {
			b.Run(fmt.Sprintf("%s/max_match=%d/engine", hc.name, maxMatch), func(b *testing.B) {
				benchStream(b, mustCompile(b, hc.rules, Options{MaxMatch: maxMatch}), hc.body)
			})
		}
		// The engine without its guard: anchored attempts and the path
		// memo alone, as before the guard existed.
		b.Run(fmt.Sprintf("%s/max_match=%d/attempts", hc.name, DefaultMaxMatch), func(b *testing.B) {
			s := mustCompile(b, hc.rules, Options{})
			s.guardMode = guardNever
			benchStream(b, s, hc.body)
		})
		b.Run(fmt.Sprintf("%s/regexp", hc.name), func(b *testing.B) {
			re := combined(hc.rules)
			b.SetBytes(int64(len(hc.body)))
			cpu0 := cpuTime()
			for range b.N {
				re.ReplaceAllLiteral(hc.body, nil)
			}
			reportCPU(b, cpuTime()-cpu0, len(hc.body))
		})
	}
}

// BenchmarkPrefilter measures the candidate scan alone (no DFA, no output).
func BenchmarkPrefilter(b *testing.B) {
	for _, body := range benchBodies {
		data, err := os.ReadFile(body.file)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1, 10, 200} {
			s := mustCompile(b, benchRules(n), Options{})
			b.Run(fmt.Sprintf("%s/rules=%d", body.name, n), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				cpu0 := cpuTime()
				for range b.N {
					for i := 0; ; i++ {
						if i = s.pre.next(data, i); i >= len(data) {
							break
						}
					}
				}
				reportCPU(b, cpuTime()-cpu0, len(data))
			})
		}
	}
}

// wrkRules are the 10 rules of integration/bench-substitute.sh (6 literal,
// 4 regex), so the engine's share of that end-to-end figure can be
// measured and profiled alone.
func wrkRules() []Rule {
	return []Rule{
		lit("https://doc.rust-lang.org", "https://docs.example.org"),
		lit("<table>", `<table class="t">`),
		lit("https://llvm.org", "https://llvm.example.org"),
		lit("rustc", "RUSTC"),
		lit("legacyWidget", "widget"),
		lit("https://cdn.example.com/", "/static/"),
		rx(`https?://github\.com/([\w-]+)`, "https://git.example.com/$1"),
		rx(`\bwarning\b`, "WARN"),
		rx(`\bv(\d+)\.(\d+)\.(\d+)\b`, "v$1.$2.x"),
		rx(`campaign-[0-9a-f]{8}`, "campaign"),
	}
}

// BenchmarkWrkRules streams the 1 MB HTML page through the rules of the
// end-to-end benchmark, in the 32 KiB writes reverse_proxy makes.
func BenchmarkWrkRules(b *testing.B) {
	data, err := os.ReadFile("testdata/rustc-book.html")
	if err != nil {
		b.Fatal(err)
	}
	benchStream(b, mustCompile(b, wrkRules(), Options{}), data)
}

// TestGuardedStreamMemory: with its guard on, a stream holds at most about
// twice MaxMatch plus 100 KiB (its input rounds, the scans' bit rings and
// kept states).
func TestGuardedStreamMemory(t *testing.T) {
	body := []byte(strings.Repeat(strings.Repeat("a", 300)+"b", 2000))
	for _, maxMatch := range []int{1 << 10, DefaultMaxMatch, 1 << 20} {
		s := mustCompile(t, []Rule{rx(`a{1,200}b|a+c`, "")}, Options{MaxMatch: maxMatch})
		st := s.NewStream(io.Discard, nil)
		streamOnce(st, body)
		if st.guard == nil || !st.guard.on {
			t.Fatalf("max_match %d: the guard did not turn on", maxMatch)
		}
		if got, want := st.memSize(), 2*maxMatch+100<<10; got > want {
			t.Errorf("max_match %d: guarded stream owns %d bytes, want <= %d", maxMatch, got, want)
		}
	}
}

// BenchmarkWrkRulesChunks streams the page of BenchmarkWrkRules in writes
// of each size reverse_proxy may make (its 32 KiB buffer, or less when a
// read of the upstream returns less). With evict, a 4 MiB buffer is
// written between writes (outside the timer), as the socket copies and
// the other processes of an end-to-end run do to the caches: each Write
// then starts on cold tables.
func BenchmarkWrkRulesChunks(b *testing.B) {
	data, err := os.ReadFile("testdata/rustc-book.html")
	if err != nil {
		b.Fatal(err)
	}
	s := mustCompile(b, wrkRules(), Options{})
	for _, evict := range []int{0, 4 << 20} {
		scratch := make([]byte, evict)
		for _, size := range []int{4 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10} {
			b.Run(fmt.Sprintf("evict=%dK/chunk=%dK", evict>>10, size>>10), func(b *testing.B) {
				st := s.NewStream(io.Discard, nil)
				streamOnce(st, data)
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					st.Reset(io.Discard, nil)
					for p := data; len(p) > 0; {
						n := min(len(p), size)
						if evict > 0 {
							b.StopTimer()
							for i := 0; i < len(scratch); i += 64 {
								scratch[i]++
							}
							b.StartTimer()
						}
						st.Write(p[:n])
						p = p[n:]
					}
					st.Close()
				}
			})
		}
	}
}
