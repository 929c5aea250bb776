// Package docs_test checks the documentation against the code: every
// Caddyfile in the README, docs/ and examples/ is as `caddy fmt` writes it,
// every JSON example adapts from the Caddyfile shown just before it, the
// README links nowhere outside the repository, the migration pages'
// Caddyfiles load and each of their differences names its test, and every
// test the design and migration pages name exists.
package docs_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-edgekit/edgekit"
	"github.com/caddy-edgekit/edgekit/internal/adapttest"
)

// block is one fenced code block of a Markdown file.
type block struct {
	file, lang, text string
	line             int
}

var fence = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```")

// markdownFiles are the README and every page under docs/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, pages...)
}

func blocks(t *testing.T, file string) []block {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	var out []block
	for _, m := range fence.FindAllStringSubmatchIndex(text, -1) {
		out = append(out, block{
			file: file,
			lang: text[m[2]:m[3]],
			text: text[m[4]:m[5]],
			line: strings.Count(text[:m[0]], "\n") + 1,
		})
	}
	return out
}

func TestCaddyfilesAreFormatted(t *testing.T) {
	var all []block
	for _, f := range markdownFiles(t) {
		for _, b := range blocks(t, f) {
			if b.lang == "caddyfile" {
				all = append(all, b)
			}
		}
	}
	example, err := os.ReadFile("../examples/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, block{file: "../examples/Caddyfile", text: string(example), line: 1})
	// The golden adapt tests' inputs: a Caddyfile, then a line of dashes.
	golden, err := filepath.Glob("../*/testdata/*.caddyfiletest")
	if err != nil || len(golden) == 0 {
		t.Fatalf("no golden adapt tests found (%v)", err)
	}
	for _, f := range golden {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in, _, _ := strings.Cut(string(b), "----------")
		all = append(all, block{file: f, text: in, line: 1})
	}
	if len(all) < 10 {
		t.Fatalf("found only %d Caddyfiles: the fence pattern no longer matches the docs", len(all))
	}
	for _, b := range all {
		if got := string(caddyfile.Format([]byte(b.text))); got != b.text {
			t.Errorf("%s:%d: caddy fmt would write\n%s\ninstead of\n%s", b.file, b.line, got, b.text)
		}
	}
}

func TestJSONExamplesAdaptFromTheirCaddyfile(t *testing.T) {
	twins := 0
	for _, f := range markdownFiles(t) {
		bs := blocks(t, f)
		for i := 1; i < len(bs); i++ {
			if bs[i].lang != "json" || bs[i-1].lang != "caddyfile" {
				continue
			}
			twins++
			cf, js := bs[i-1], bs[i]
			adapted, warnings, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt([]byte(cf.text), nil)
			if err != nil {
				t.Errorf("%s:%d: adapting: %v", cf.file, cf.line, err)
				continue
			}
			for _, w := range warnings {
				t.Logf("%s:%d: warning: %s", cf.file, cf.line, w.Message)
			}
			var want, got any
			if err := json.Unmarshal([]byte(js.text), &want); err != nil {
				t.Errorf("%s:%d: the JSON example does not parse: %v", js.file, js.line, err)
				continue
			}
			if err := json.Unmarshal(adapted, &got); err != nil {
				t.Fatal(err)
			}
			if !containsObject(got, want) {
				t.Errorf("%s:%d: no object in the JSON adapted from the Caddyfile at line %d matches the example:\n%s\nadapted:\n%s",
					js.file, js.line, cf.line, js.text, adapted)
			}
		}
	}
	if twins < 4 {
		t.Fatalf("found only %d Caddyfile/JSON twins; each module's page shows one", twins)
	}
}

// containsObject reports whether want matches doc or any value nested in it.
func containsObject(doc, want any) bool {
	if matches(doc, want) {
		return true
	}
	switch d := doc.(type) {
	case map[string]any:
		for _, v := range d {
			if containsObject(v, want) {
				return true
			}
		}
	case []any:
		for _, v := range d {
			if containsObject(v, want) {
				return true
			}
		}
	}
	return false
}

// matches reports whether got has every field of want with the same value
// (objects may have more fields; arrays must match element by element).
func matches(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !matches(gv, wv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !matches(g[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return fmt.Sprint(got) == fmt.Sprint(want)
	}
}

var link = regexp.MustCompile(`\]\(([^)\s]+)\)|<(https?://[^>]+)>`)

func TestReadmeLinksStayInTheRepository(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range link.FindAllStringSubmatch(string(b), -1) {
		n++
		target := m[1] + m[2]
		if strings.HasPrefix(target, "http://localhost:") {
			continue // the demo, on this machine
		}
		if strings.Contains(target, "://") || strings.HasPrefix(target, "/") || strings.Contains(target, "..") {
			t.Errorf("README links outside the repository: %s", target)
			continue
		}
		path, _, _ := strings.Cut(target, "#")
		if _, err := os.Stat(filepath.Join("..", path)); err != nil {
			t.Errorf("README links to %s, which the repository lacks", target)
		}
	}
	if n == 0 {
		t.Fatal("the README has no links at all: the link pattern is broken")
	}
}

// migrationPages are the pages for people moving from another tool.
func migrationPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("migrate-*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 3 {
		t.Fatalf("found %d migration pages, want the client_ip, throttle and substitute ones", len(pages))
	}
	return pages
}

// TestMigrationCaddyfilesAdapt: every Caddyfile of a migration page loads
// as `caddy run` would load it (adapted, then provisioned). The other
// tools' configurations are written as text blocks, not Caddyfiles.
func TestMigrationCaddyfilesAdapt(t *testing.T) {
	for _, page := range migrationPages(t) {
		n := 0
		for _, b := range blocks(t, page) {
			if b.lang != "caddyfile" {
				continue
			}
			n++
			if err := adapttest.Validate(b.text); err != nil {
				t.Errorf("%s:%d: the Caddyfile does not load: %v", b.file, b.line, err)
			}
		}
		if n == 0 {
			t.Errorf("%s has no Caddyfile", page)
		}
	}
}

// TestMigrationDifferencesCiteTests: every row of a migration page's
// "Behaves differently" tables names the test that shows it.
func TestMigrationDifferencesCiteTests(t *testing.T) {
	for _, page := range migrationPages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		tables := 0
		for i := 0; i < len(lines); i++ {
			if !strings.HasPrefix(lines[i], "Behaves differently") {
				continue
			}
			tables++
			j := i + 1
			for j < len(lines) && !strings.HasPrefix(lines[j], "|") {
				j++
			}
			rows := 0
			for j += 2; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ { // past the header and its rule
				rows++
				if !testName.MatchString(lines[j]) {
					t.Errorf("%s:%d: a difference without the test that shows it: %s", page, j+1, lines[j])
				}
			}
			if rows == 0 {
				t.Errorf("%s:%d: a \"Behaves differently\" table without rows", page, i+1)
			}
			i = j
		}
		if tables == 0 {
			t.Errorf("%s has no \"Behaves differently\" table", page)
		}
	}
}

var testName = regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]+)`")

// TestCitedTestsExist: every test the design page and the migration pages
// name exists in the repository.
func TestCitedTestsExist(t *testing.T) {
	defined := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range append([]string{"design.md"}, migrationPages(t)...) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		cited := testName.FindAllStringSubmatch(string(b), -1)
		if len(cited) == 0 {
			t.Errorf("%s cites no test", page)
		}
		for _, m := range cited {
			if !defined[m[1]] {
				t.Errorf("%s cites %s, which no test file defines", page, m[1])
			}
		}
	}
}

var testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]+)\(`)
