package edgebench

import (
	"math"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestParseServerTiming(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	for _, tc := range []struct {
		in   []string
		want []ServerTimingMetric
	}{
		{[]string{`db;dur=12.3;desc="x"`}, []ServerTimingMetric{{Name: "db", Dur: ms(12.3), HasDur: true, Desc: "x"}}},
		{[]string{`miss, db;dur=53, app;dur=47.2`}, []ServerTimingMetric{
			{Name: "miss"}, {Name: "db", Dur: ms(53), HasDur: true}, {Name: "app", Dur: ms(47.2), HasDur: true}}},
		{[]string{"a;dur=1", "b;dur=2"}, []ServerTimingMetric{{Name: "a", Dur: ms(1), HasDur: true}, {Name: "b", Dur: ms(2), HasDur: true}}},
		// Whitespace around separators, case-insensitive parameter names,
		// a token desc, a parameter without value.
		{[]string{" cache ;  DUR = 0.5 ; Desc=hit ; flag "}, []ServerTimingMetric{{Name: "cache", Dur: ms(0.5), HasDur: true, Desc: "hit"}}},
		// The first of repeated parameters wins, even an invalid one.
		{[]string{`db;dur=1;dur=2;desc=a;desc=b`}, []ServerTimingMetric{{Name: "db", Dur: ms(1), HasDur: true, Desc: "a"}}},
		{[]string{`db;dur=abc;dur=2`}, []ServerTimingMetric{{Name: "db"}}},
		// Commas, semicolons and escaped quotes inside a quoted desc.
		{[]string{`edge;desc="a, b; \"c\" \\";dur=3, origin;dur=4`}, []ServerTimingMetric{
			{Name: "edge", Dur: ms(3), HasDur: true, Desc: `a, b; "c" \`}, {Name: "origin", Dur: ms(4), HasDur: true}}},
		// Durations that are not plain non-negative decimals are ignored.
		{[]string{`a;dur=-1, b;dur=NaN, c;dur=inf, d;dur=0x10, e;dur=1e20, f;dur=1_0, g;dur=.5, h;dur=2e3`}, []ServerTimingMetric{
			{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}, {Name: "e"}, {Name: "f"},
			{Name: "g", Dur: ms(0.5), HasDur: true}, {Name: "h", Dur: 2 * time.Second, HasDur: true}}},
		// Malformed metrics are skipped; the rest still count.
		{[]string{`"quoted";dur=1, ok;dur=2`}, []ServerTimingMetric{{Name: "ok", Dur: ms(2), HasDur: true}}},
		{[]string{`bad name;dur=1, ok;dur=2`}, []ServerTimingMetric{{Name: "ok", Dur: ms(2), HasDur: true}}},
		{[]string{`a;=1, b;dur=2`}, []ServerTimingMetric{{Name: "b", Dur: ms(2), HasDur: true}}},
		{[]string{`a;desc="unterminated, b;dur=2`}, nil},
		{[]string{`a;desc="x, y";dur=oops junk, b;dur=2`}, []ServerTimingMetric{{Name: "b", Dur: ms(2), HasDur: true}}},
		{[]string{"", " , ,", ";"}, nil},
	} {
		got := ParseServerTiming(tc.in...)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseServerTiming(%q)\n got %+v\nwant %+v", tc.in, got, tc.want)
		}
	}
}

func TestFormatServerTiming(t *testing.T) {
	metrics := []ServerTimingMetric{
		{Name: "db", Dur: 12345678, HasDur: true, Desc: `say "hi"`},
		{Name: "miss"},
		{Name: "app", Dur: 2 * time.Millisecond, HasDur: true},
		{Name: "zero", HasDur: true},
	}
	const want = `db;dur=12.345678;desc="say \"hi\"", miss, app;dur=2, zero;dur=0`
	if got := formatServerTiming(metrics); got != want {
		t.Errorf("formatServerTiming = %s, want %s", got, want)
	}
	if back := ParseServerTiming(want); !reflect.DeepEqual(back, metrics) {
		t.Errorf("parsing it back gives %+v", back)
	}
}

// FuzzParseServerTiming feeds the parser arbitrary header values (they come
// from the server under test). It must not panic, must only return metrics
// with token names and durations in range, and what it returns must survive
// a format/parse round trip unchanged.
func FuzzParseServerTiming(f *testing.F) {
	for _, seed := range []string{
		`db;dur=12.3;desc="x"`,
		`miss, db;dur=53, app;dur=47.2`,
		`edge;desc="a, b; \"c\" \\";dur=3, origin;dur=4`,
		` cache ;  DUR = 0.5 ; Desc=hit ; flag `,
		`a;dur=-1, b;dur=NaN, c;dur=1e20, d;dur=.5e1`,
		`a;desc="unterminated, b;dur=2`,
		`x;dur=999999999.999999`,
		`x;dur=999999999, x;dur=999999999, x;dur=1`,
		`edge;dur=1.250, origin;dur=251.000, origin-conn;desc=new, origin-dial;dur=0.2, origin-tls;dur=500, client;desc="h3 tls=0rtt", rtt;dur=20`,
		`edge;dur=999999999, origin;dur=999999999, origin-dial;dur=999999999, origin-tls;dur=999999999, EDGE;dur=-1`,
		`client;desc="h2 tls=resumed tls=new", origin-conn;desc="re\"used", client;desc=h9`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		metrics := ParseServerTiming(header)
		for _, m := range metrics {
			if m.Name == "" || strings.IndexFunc(m.Name, func(r rune) bool { return r > 0x7f || !isTokenChar(byte(r)) }) >= 0 {
				t.Fatalf("metric name %q is not a token", m.Name)
			}
			if m.Dur < 0 || m.Dur > maxServerTiming || (!m.HasDur && m.Dur != 0) {
				t.Fatalf("metric %+v: dur out of range", m)
			}
		}
		durs, pop := serverTimingSample([]string{header})
		for name, d := range durs {
			if d < 0 || d > maxServerTiming {
				t.Fatalf("%s: durs sum to %v, out of range", name, d)
			}
		}
		// The split: every part in range for any TTFB, and its strings
		// from a closed set.
		if pop != nil {
			for _, d := range []time.Duration{pop.Edge, pop.Origin, pop.OriginDial, pop.OriginTLS, pop.RTT} {
				if d < 0 || d > maxServerTiming {
					t.Fatalf("PoP timing %+v: out of range", pop)
				}
			}
			if !slices.Contains([]string{"", ConnReused, ConnNew, DescOther}, pop.OriginConn) ||
				!slices.Contains([]string{"", "h1", "h2", "h3", DescOther}, pop.ClientProto) ||
				!slices.Contains([]string{"", TLSNone, TLSNew, TLSResumed, TLS0RTT, DescOther}, pop.ClientTLS) {
				t.Fatalf("PoP timing %+v: a desc outside the known values", pop)
			}
			for _, ttfb := range []time.Duration{-1, 0, time.Millisecond, maxServerTiming, math.MaxInt64} {
				split, _ := splitTTFB(ttfb, pop)
				for _, d := range []time.Duration{split.LastMile, split.Edge, split.OriginConnect, split.Origin} {
					if d < 0 {
						t.Fatalf("split of %v by %+v: %+v has a negative part", ttfb, pop, split)
					}
				}
			}
		}
		formatted := formatServerTiming(metrics)
		again := ParseServerTiming(formatted)
		if len(metrics) == 0 && len(again) == 0 {
			return
		}
		if !reflect.DeepEqual(again, metrics) {
			t.Fatalf("round trip changed the metrics:\n in  %q\n got %+v\n fmt %q\n got %+v", header, metrics, formatted, again)
		}
	})
}

// formatServerTiming writes metrics as one Server-Timing header value, dur
// in milliseconds with nanosecond precision: the inverse of
// ParseServerTiming, for its tests.
func formatServerTiming(metrics []ServerTimingMetric) string {
	var b strings.Builder
	for i, m := range metrics {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m.Name)
		if m.HasDur {
			ns := int64(m.Dur)
			b.WriteString(";dur=" + strconv.FormatInt(ns/1e6, 10))
			if frac := ns % 1e6; frac != 0 {
				b.WriteString(strings.TrimRight("."+strconv.FormatInt(1e6+frac, 10)[1:], "0"))
			}
		}
		if m.Desc != "" {
			b.WriteString(`;desc="`)
			for j := 0; j < len(m.Desc); j++ {
				if c := m.Desc[j]; c == '"' || c == '\\' {
					b.WriteByte('\\')
				}
				b.WriteByte(m.Desc[j])
			}
			b.WriteByte('"')
		}
	}
	return b.String()
}

// manyServerTimingNames is a Server-Timing value of n metrics, each with its
// own name and a dur of 1 ms.
func manyServerTimingNames(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("m" + strconv.Itoa(i) + `;dur=1;desc="a \"b\""`)
	}
	return b.String()
}

// One response naming 200,000 metrics costs a sample maxTimingNames names
// and "(other)", every duration still counted once; parsing it allocates
// about as much as those names, not a metric or a map entry per entry of the
// header, and what the sample keeps does not point into the header.
func TestServerTimingDurationsBounded(t *testing.T) {
	const n = 200_000
	header := []string{manyServerTimingNames(n)}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	durs := serverTimingDurations(header)
	runtime.ReadMemStats(&after)
	if len(durs) != maxTimingNames+1 {
		t.Errorf("%d names kept, want %d and %q", len(durs), maxTimingNames, timingOther)
	}
	var total time.Duration
	for _, d := range durs {
		total += d
	}
	if total != n*time.Millisecond || durs[timingOther] != (n-maxTimingNames)*time.Millisecond {
		t.Errorf("durations sum to %v (other %v), want %v in all", total, durs[timingOther], n*time.Millisecond)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("parsing %d metrics allocated %d bytes", n, alloc)
	if alloc > 64<<10 {
		t.Errorf("parsing %d metrics allocated %d bytes, want a bound independent of their number (64 KiB)", n, alloc)
	}
	start := uintptr(unsafe.Pointer(unsafe.StringData(header[0])))
	for name := range durs {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(name))); p >= start && p < start+uintptr(len(header[0])) {
			t.Errorf("kept name %q points into the header, which the sample then holds", name)
			break
		}
	}
}

// repeatedServerTiming is a Server-Timing value of n metrics named name, each
// with the largest dur accepted (just under maxServerTimingMS).
func repeatedServerTiming(name string, n int) string {
	return strings.Repeat(name+";dur=999999999, ", n-1) + name + ";dur=999999999"
}

// A server repeating one name with the largest accepted dur cannot wrap a
// sample's per-name sum (10,000 of them are 1e19 ns, past int64): the sum
// saturates at the bound of a single dur, and so does "(other)".
func TestServerTimingDurationsSaturate(t *testing.T) {
	const n = 10_000
	header := []string{repeatedServerTiming("a", n), manyServerTimingNames(maxTimingNames), repeatedServerTiming("late", n)}
	durs := serverTimingDurations(header)
	if len(durs) != maxTimingNames+1 {
		t.Fatalf("%d names kept, want %d and %q", len(durs), maxTimingNames, timingOther)
	}
	for _, name := range []string{"a", timingOther} {
		if d := durs[name]; d != maxServerTiming {
			t.Errorf("%s: %d dur=999999999 sum to %v (%d ns), want the bound %v", name, n, d, int64(d), maxServerTiming)
		}
	}
}

// A probe run's mean over many samples at the bound cannot wrap either.
func TestServerTimingMeanOfSaturatedSamples(t *testing.T) {
	const n = 20_000 // 20,000 x 1e15 ns is past int64
	a := timingAggregate{}
	for range n {
		a.add(map[string]time.Duration{"a": maxServerTiming})
	}
	got := a.stats()["a"]
	if got.Count != n || got.Mean != maxServerTiming || got.P50 != maxServerTiming || got.P99 != maxServerTiming {
		t.Errorf("%d samples of %v give %+v, want count %d and every figure %v", n, maxServerTiming, got, n, maxServerTiming)
	}
}
