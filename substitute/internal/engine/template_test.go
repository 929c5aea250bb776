package engine

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// expandPatterns are regex rules whose groups cover what regexp.Expand
// distinguishes: numbers past 9, a group that does not take part, names made
// of digits ("01", "1a"), two groups sharing a name (Go allows it; Expand
// takes the first that took part), and an optional group at the end.
var expandPatterns = []struct{ pattern, input string }{
	{`(?P<x>a)(b)(?P<y_1>c)?(?P<01>d)(?P<n9>e)`, "zabdez"},
	{`(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(?P<1a>l)`, "-abcdefghijkl-"},
	{`(?:(?P<x>p)|(?P<x>q))(?P<_z>r)?`, "<q>"},
	{`(?P<1>s)(t)`, "st"},
}

// checkExpand compiles one regex rule with replacement tmpl, runs input
// through a stream and compares the output with regexp.Expand's. A template
// the engine refuses must refer to a group Expand would expand to nothing.
func checkExpand(t *testing.T, pattern, input, tmpl string) {
	t.Helper()
	re := regexp.MustCompile(pattern)
	idx := re.FindStringSubmatchIndex(input)
	if idx == nil {
		t.Errorf("%q does not match %q", pattern, input)
		return
	}
	s, err := Compile([]Rule{{Pattern: pattern, Replacement: tmpl}}, Options{})
	if err != nil {
		name, ok := refusedName(err.Error())
		if !ok {
			t.Errorf("pattern %q, template %q: unexpected error %v", pattern, tmpl, err)
			return
		}
		// Every group of every pattern above takes part in a canary
		// match with distinct non-empty text, so an empty expansion of
		// ${name} means the pattern has no such group.
		canary := make([]int, 2*(re.NumSubexp()+1))
		src := strings.Repeat("#", len(canary))
		for i := range canary {
			canary[i] = i
		}
		if got := re.ExpandString(nil, "${"+name+"}", src, canary); len(got) != 0 {
			t.Errorf("pattern %q, template %q: refused group %q, which Expand resolves (%q): %v", pattern, tmpl, name, got, err)
			return
		}
		if !strings.Contains(tmpl, "$"+name) && !strings.Contains(tmpl, "${"+name+"}") {
			t.Errorf("pattern %q, template %q: refused group %q, not in the template: %v", pattern, tmpl, name, err)
			return
		}
		return
	}
	want := input[:idx[0]] + string(re.ExpandString(nil, tmpl, input, idx)) + input[idx[1]:]
	got, _, err := run(s, nil, []byte(input), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("pattern %q, template %q: got %q, regexp.Expand gives %q", pattern, tmpl, got, want)
		return
	}
}

// refusedName extracts the group name from the engine's "refers to group
// %q" error.
func refusedName(msg string) (string, bool) {
	_, after, ok := strings.Cut(msg, `refers to group "`)
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(after, `"`)
	return name, ok
}

// TestTemplateExpand pins the cases Expand reads differently from a reader
// that stops at the first non-digit.
func TestTemplateExpand(t *testing.T) {
	for _, tc := range []struct{ pattern, input, tmpl string }{
		{`(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(?P<1a>l)`, "abcdefghijkl", "$10|$1a|${1}a|$11$"},
		{`(?P<x>a)(b)(?P<y_1>c)?(?P<01>d)(?P<n9>e)`, "abde", "[$01][${1}][$3][$n9.][${x}_]"},
		{`(?:(?P<x>p)|(?P<x>q))`, "q", "<$x>"},
		{`(a)`, "a", "$ $} ${ ${}x $$1 ${1}é ${1"},
		{`(a)`, "a", "cost: $$5, {x}"},
	} {
		if _, err := Compile([]Rule{{Pattern: tc.pattern, Replacement: tc.tmpl}}, Options{}); err != nil {
			t.Errorf("pattern %q, template %q: %v", tc.pattern, tc.tmpl, err)
			continue
		}
		checkExpand(t, tc.pattern, tc.input, tc.tmpl)
	}
	for _, tc := range []struct{ tmpl, name string }{
		{"$1é", "1é"}, // Expand reads letters past ASCII: group "1é"
		{"$01", "01"}, // a leading zero makes a name, not group 1
		{"$1a", "1a"},
		{"$x_", "x_"},
		{"${2}", "2"},
		{"$9999999999", "9999999999"},
	} {
		_, err := Compile([]Rule{{Pattern: `(a)`, Replacement: tc.tmpl}}, Options{})
		if name, ok := refusedName(errString(err)); !ok || name != tc.name {
			t.Errorf("template %q with pattern (a): want a refusal naming group %q, got %v", tc.tmpl, tc.name, err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestTemplateExpandRandom compares the engine with regexp.Expand over
// random templates built from the bytes that matter to $ references.
func TestTemplateExpandRandom(t *testing.T) {
	alphabet := []string{"$", "$", "$", "{", "}", "0", "1", "1", "2", "9", "a", "x", "_", "y", "é", "n", " ", "-", "{x}", "$$"}
	rng := rand.New(rand.NewPCG(15, 1))
	n := 3000
	if testing.Short() {
		n = 500
	}
	for range n {
		var b strings.Builder
		for k := rng.IntN(10); k >= 0; k-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		p := expandPatterns[rng.IntN(len(expandPatterns))]
		checkExpand(t, p.pattern, p.input, b.String())
		if t.Failed() {
			return
		}
	}
}

// FuzzTemplateExpand is TestTemplateExpandRandom for go test -fuzz.
func FuzzTemplateExpand(f *testing.F) {
	for _, s := range []string{"$1é", "$01", "${1}0", "$10", "$$1", "${x}", "$x_", "${1", "{x}"} {
		f.Add(uint8(0), s)
	}
	f.Fuzz(func(t *testing.T, which uint8, tmpl string) {
		p := expandPatterns[int(which)%len(expandPatterns)]
		checkExpand(t, p.pattern, p.input, tmpl)
	})
}

// TestLiteralReplacementVerbatim: a literal rule writes its replacement as
// given, $ included (nginx sub_filter, Caddy's replace-response); only
// {placeholders} are expanded.
func TestLiteralReplacementVerbatim(t *testing.T) {
	for _, tmpl := range []string{"$5", "$$", "$0", "${1}", "$1é", "a$", "$", "{v} costs $5"} {
		s, err := Compile([]Rule{{Pattern: "price", Literal: true, Replacement: tmpl}}, Options{})
		if err != nil {
			t.Fatalf("literal rule, replacement %q: %v", tmpl, err)
		}
		vars := func(name string) (string, bool) { return "V", name == "v" }
		got, _, err := run(s, vars, []byte("a price."), nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := "a " + strings.ReplaceAll(tmpl, "{v}", "V") + "."; string(got) != want {
			t.Errorf("literal rule, replacement %q: got %q, want %q", tmpl, got, want)
		}
	}
}
