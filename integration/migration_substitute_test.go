package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The test cases of the tools people move to substitute from, run against
// edgekit. docs/migrate-substitute.md cites each difference found here.
//
// Ported cases keep their source's input, rule and expected output, and
// name the test they come from; the Go code is ours. Sources:
//   - openresty/replace-filter-nginx-module, t/sanity.t (BSD-2-Clause,
//     Yichun Zhang): nginx's replace_filter, on the sregex engine;
//   - yaoweibin/ngx_http_substitutions_filter_module, test/t/*.t
//     (BSD-2-Clause, Weibin Yao): nginx's subs_filter, run here against a
//     real nginx with Debian's libnginx-mod-http-subs-filter;
//   - caddyserver/replace-response (Apache-2.0): it has no test suite; its
//     README's examples and its handler.go's behaviour.

// migrationCase is one ported case: a file served with rules, what the
// source tool answers (from its test, or measured), and what edgekit
// answers. why is set when they differ.
type migrationCase struct {
	from   string // the source's test
	file   string // name under the served root; its extension gives the type
	body   string
	rules  []string // lines of a substitute block
	theirs string
	ours   string
	why    string
}

// serveMigrationCases starts a Caddy serving each case's file under a
// substitute block of its rules, and returns a function that GETs a path.
func serveMigrationCases(t *testing.T, cases []migrationCase) func(path string) (*http.Response, string) {
	t.Helper()
	root := t.TempDir()
	var sites strings.Builder
	fmt.Fprintf(&sites, "http://{$HOST}:{$HTTP_PORT} {\n\troot * %s\n", root)
	for _, tc := range cases {
		if err := os.WriteFile(filepath.Join(root, tc.file), []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sites, "\thandle /%s {\n\t\tsubstitute {\n\t\t\t%s\n\t\t}\n\t\tfile_server\n\t}\n", tc.file, strings.Join(tc.rules, "\n\t\t\t"))
	}
	sites.WriteString("}\n")
	c := StartCaddy(t, sites.String())
	client := c.Client()
	return func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := client.Get(c.URL(path))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: status %d", path, resp.StatusCode)
		}
		return resp, string(b)
	}
}

func checkMigrationCases(t *testing.T, cases []migrationCase) {
	t.Helper()
	get := serveMigrationCases(t, cases)
	for _, tc := range cases {
		if (tc.theirs != tc.ours) != (tc.why != "") {
			t.Errorf("%s: a case whose outputs differ says why, and only such a case", tc.from)
		}
		if _, got := get("/" + tc.file); got != tc.ours {
			t.Errorf("%s (%s): edgekit wrote %q, want %q", tc.from, strings.Join(tc.rules, "; "), got, tc.ours)
		}
	}
}

// trimSample is replace_filter's whitespace sample (t/sanity.t TEST 19-21).
const trimSample = "  hello, world  \nblah yeah\nhello  \n   baby!\n     \nabc\n"

// TestReplaceFilterCasesPorted runs cases of nginx's replace_filter
// (t/sanity.t, expected outputs as that file states them) through
// substitute. The module is not packaged for Debian, so its side is its
// tests' expectations; where edgekit differs, Perl's answer (perl -e, the
// semantics replace_filter's README promises) is noted.
func TestReplaceFilterCasesPorted(t *testing.T) {
	checkMigrationCases(t, []migrationCase{
		{from: "sanity.t TEST 1 ambiguous pattern", file: "rf1.html", body: "abcabcabde\n",
			rules: []string{"replace abcabd X"}, theirs: "abcXe\n", ours: "abcXe\n"},
		{from: "sanity.t TEST 3 alt", file: "rf3.html", body: "abc\n",
			rules: []string{"regex `ab|abc` X"}, theirs: "Xc\n", ours: "X\n",
			why: "priority longest (the default) takes the longest match at a position; replace_filter and Perl take the first alternative"},
		{from: "sanity.t TEST 3 alt, priority first", file: "rf3first.html", body: "abc\n",
			rules: []string{"regex `ab|abc` X", "priority first"}, theirs: "Xc\n", ours: "Xc\n"},
		{from: "sanity.t TEST 4 caseless", file: "rf4.html", body: "abcabcaBde\n",
			rules: []string{"regex `(?i)abCabd` X"}, theirs: "abcXe\n", ours: "abcXe\n"},
		{from: "sanity.t TEST 10 once by default", file: "rf10.html", body: "abcabcabde\n",
			rules: []string{"replace a X"}, theirs: "Xbcabcabde\n", ours: "XbcXbcXbde\n",
			why: "replace_filter replaces once unless the g flag is given; substitute replaces every match unless the rule says once"},
		{from: "sanity.t TEST 10 once, with once", file: "rf10once.html", body: "abcabcabde\n",
			rules: []string{"replace a X once"}, theirs: "Xbcabcabde\n", ours: "Xbcabcabde\n"},
		{from: "sanity.t TEST 13 global substitution", file: "rf13.html", body: "abcabcabde\n",
			rules: []string{"replace b X"}, theirs: "aXcaXcaXde\n", ours: "aXcaXcaXde\n"},
		{from: "sanity.t TEST 16 global substitution (\\d+)", file: "rf16.html", body: "hello1234, 56 world\n",
			rules: []string{"regex `\\d+` X"}, theirs: "helloX, X world\n", ours: "helloX, X world\n"},
		{from: "sanity.t TEST 16, the whole match ($& there, ${0} here)", file: "rf16amp.html", body: "hello1234, 56 world\n",
			rules: []string{"regex `\\d+` \"[${0}]\""}, theirs: "hello[1234], [56] world\n", ours: "hello[1234], [56] world\n"},
		{from: "sanity.t TEST 17 replace_types default to text/html", file: "rf17.txt", body: "abc\n",
			rules: []string{"replace b X"}, theirs: "abc\n", ours: "aXc\n",
			why: "text/plain is in substitute's default types; replace_filter's default is text/html only"},
		{from: "sanity.t TEST 21 trim both leading and trailing spaces", file: "rf21.html", body: trimSample,
			rules:  []string{"regex `^\\s+|\\s+$` \"\""},
			theirs: "hello, world\nblah yeah\nhello\nbaby!\nabc", ours: "hello, world  \nblah yeah\nhello  \n   baby!\n     \nabc",
			why: "^ and $ are the body's start and end, as in Perl without /m; sregex's are always line anchors: write (?m)"},
		{from: "sanity.t TEST 21, with (?m)", file: "rf21m.html", body: trimSample,
			rules:  []string{"regex `(?m)^\\s+|\\s+$` \"\""},
			theirs: "hello, world\nblah yeah\nhello\nbaby!\nabc", ours: "hello, world\nblah yeah\nhello\nbaby!\nabc"},
		{from: "sanity.t TEST 24 trim, 1 byte at a time", file: "rf24.html", body: "a \nb\n",
			rules: []string{"regex `(?m)^\\s+|\\s+$` \"\""}, theirs: "a\nb\n", ours: "a\nb",
			why: "the final newline is whitespace before the end, as Perl's s/^\\s+|\\s+$//mg says (a\\nb); sregex, fed in pieces, keeps it"},
		{from: "sanity.t TEST 27 \\b at the border", file: "rf27.html", body: "ab\n",
			rules: []string{"regex `\\bb|a` X"}, theirs: "Xb\n", ours: "Xb\n"},
		{from: "sanity.t TEST 33 a.+a caseless", file: "rf33.html", body: "ABCabcABCabc\n",
			rules: []string{"regex `(?i)a.+a` X"}, theirs: "Xbc\n", ours: "Xbc\n"},
		{from: "sanity.t TEST 34 backtrack into a pending capture", file: "rf34.html", body: "abcd\n",
			rules: []string{"regex `abce|b` X"}, theirs: "aXcd\n", ours: "aXcd\n"},
	})
}

// TestReplaceResponseCasesPorted runs the examples of caddyserver/
// replace-response's README through substitute, and the behaviours its
// handler.go shows: rules applied one after another (transform.Chain, so
// a later rule sees an earlier one's output) and regexp matches over 2 KB
// left alone (MaxMatchSize 2048).
func TestReplaceResponseCasesPorted(t *testing.T) {
	long := "<" + strings.Repeat("x", 3000) + ">"
	checkMigrationCases(t, []migrationCase{
		{from: "README: substring substitution", file: "rr1.html", body: "Foo, Foo\n",
			rules: []string{"replace Foo Bar"}, theirs: "Bar, Bar\n", ours: "Bar, Bar\n"},
		{from: "README: regular expression replacement", file: "rr2.html", body: "a  foobar\tb\n",
			rules: []string{"regex `\\s+foo(bar|baz)\\s+` \" foo $1 \""}, theirs: "a foo bar b\n", ours: "a foo bar b\n"},
		{from: "handler.go: rules chained", file: "rr3.html", body: "Foo\n",
			rules: []string{"replace Foo Bar", "replace Bar Baz"}, theirs: "Baz\n", ours: "Bar\n",
			why: "substitute matches every rule in one pass over the origin's body; replace-response runs each rule over the previous one's output"},
		{from: "README: regex matches longer than 2kb will not be replaced", file: "rr4.html", body: long + "\n",
			rules: []string{"regex `<x+>` X"}, theirs: long + "\n", ours: "X\n",
			why: "substitute's max_match is 16 KiB by default (up to 16 MiB); replace-response gives up at 2 KB"},
	})
}

// subsFilterModule is Debian's build of yaoweibin's subs_filter.
const subsFilterModule = "/usr/lib/nginx/modules/ngx_http_subs_filter_module.so"

// TestSubsFilterAgainstNginx serves the same files through nginx's
// subs_filter and through substitute, with the cases of subs_filter's
// test/t/*.t (their remote origins, taobao.com and blog.163.com, replaced
// by files with such text), and compares the bodies and the headers that
// differ: Last-Modified and ETag.
func TestSubsFilterAgainstNginx(t *testing.T) {
	if _, err := os.Stat(subsFilterModule); err != nil {
		const msg = "nginx's subs_filter module not installed: apt-get install libnginx-mod-http-subs-filter"
		if os.Getenv(nginxRequireEnv) == "1" {
			t.Fatalf("%s; %s=1 requires it", msg, nginxRequireEnv)
		}
		t.Skipf("%s; skipping", msg)
	}
	cases := []struct {
		migrationCase
		nginx string // the location's subs_filter directives
	}{
		{migrationCase{from: "subs_types.t TEST 1 default types", file: "a.html", body: "tom and jerry\n",
			rules: []string{"regex (?i)tom yaoweibin"}, theirs: "yaoweibin and jerry\n", ours: "yaoweibin and jerry\n"},
			`subs_filter 'tom' 'yaoweibin' ir;`},
		{migrationCase{from: "subs_types.t TEST 1, a text/plain file", file: "a.txt", body: "tom and jerry\n",
			rules: []string{"regex (?i)tom yaoweibin"}, theirs: "tom and jerry\n", ours: "yaoweibin and jerry\n",
			why: "text/plain is in substitute's default types; subs_filter's default is text/html only"},
			`subs_filter 'tom' 'yaoweibin' ir;`},
		{migrationCase{from: "subs_types.t TEST 3 xml types", file: "b.xml", body: "tom and jerry\n",
			rules: []string{"regex (?i)tom yaoweibin", "types text/xml"}, theirs: "yaoweibin and jerry\n", ours: "yaoweibin and jerry\n"},
			`subs_filter_types text/xml; subs_filter 'tom' 'yaoweibin' ir;`},
		{migrationCase{from: "subs.t TEST 1 regex, caseless", file: "blog.html", body: "<a href=\"http://blog.163.com/\">BLOG.163.COM</a>\n",
			rules: []string{"regex `(?i)163\\.com` yaoweibin"}, theirs: "<a href=\"http://blog.yaoweibin/\">BLOG.yaoweibin</a>\n", ours: "<a href=\"http://blog.yaoweibin/\">BLOG.yaoweibin</a>\n"},
			`subs_filter '163\.com' 'yaoweibin' ir;`},
		{migrationCase{from: "subs_capture.t TEST 1 captures", file: "capture.html", body: "blog.163.com and 163.COM\n",
			rules: []string{"regex `(?i)163.(com)` yaoweibin.$1"}, theirs: "blog.yaoweibin.com and yaoweibin.COM\n", ours: "blog.yaoweibin.com and yaoweibin.COM\n"},
			`subs_filter '163.(com)' 'yaoweibin.$1' ir;`},
		{migrationCase{from: "subs_filter o flag (once)", file: "once.html", body: "tom, tom\n",
			rules: []string{"replace tom X once"}, theirs: "X, tom\n", ours: "X, tom\n"},
			`subs_filter 'tom' 'X' o;`},
	}
	root := t.TempDir()
	var locations strings.Builder
	for _, tc := range cases {
		fmt.Fprintf(&locations, "location = /%s { %s }\n", tc.file, tc.nginx)
	}
	// nginx first: without it (or its module) the test skips before any
	// Caddy starts.
	nginx := StartNginxWith(t, "load_module "+subsFilterModule+";", "", `
		root `+root+`;
		types { text/html html; text/plain txt; text/xml xml; }
		`+locations.String())
	var ported []migrationCase
	for _, tc := range cases {
		ported = append(ported, tc.migrationCase)
	}
	get := serveMigrationCases(t, ported) // writes the files into its own root
	for _, tc := range cases {
		if err := os.WriteFile(filepath.Join(root, tc.file), []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range cases {
		if (tc.theirs != tc.ours) != (tc.why != "") {
			t.Errorf("%s: a case whose outputs differ says why, and only such a case", tc.from)
		}
		resp, err := http.Get(nginx.URL("/" + tc.file))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != tc.theirs {
			t.Errorf("%s: nginx's subs_filter answered %d %q, want %q", tc.from, resp.StatusCode, b, tc.theirs)
		}
		ours, body := get("/" + tc.file)
		if body != tc.ours {
			t.Errorf("%s: edgekit wrote %q, want %q", tc.from, body, tc.ours)
		}
		if tc.file != "a.html" {
			continue
		}
		// Headers of a substituted file (measured): subs_filter drops
		// Last-Modified and keeps the file's strong ETag, though the body
		// is no longer the file's; substitute keeps Last-Modified and
		// weakens the ETag, which conditional requests still use.
		if lm := resp.Header.Get("Last-Modified"); lm != "" {
			t.Errorf("nginx's subs_filter kept Last-Modified %q; the page says it drops it", lm)
		}
		if et := resp.Header.Get("ETag"); et == "" || strings.HasPrefix(et, "W/") {
			t.Errorf("nginx's subs_filter's ETag is %q; the page says it keeps the file's strong one", et)
		}
		if ours.Header.Get("Last-Modified") == "" {
			t.Error("substitute dropped Last-Modified; the page says it keeps it")
		}
		if et := ours.Header.Get("ETag"); !strings.HasPrefix(et, `W/"`) {
			t.Errorf("substitute's ETag is %q, want a weak one", et)
		}
	}
}

// TestEmptyMatchRulesRefused: replace_filter's t/sanity.t TEST 14
// (`replace_filter [0-9]* X g` writes X between every two bytes) and a
// subs_filter regex that can match empty are configurations substitute
// refuses when it loads, naming the rule.
func TestEmptyMatchRulesRefused(t *testing.T) {
	c := StartCaddy(t, `http://{$HOST}:{$HTTP_PORT} {
	respond ok
}`)
	status, body := c.Load("http://{$HOST}:{$HTTP_PORT} {\n\tsubstitute {\n\t\tregex `[0-9]*` X\n\t}\n\trespond ok\n}\n")
	if status == http.StatusOK || !strings.Contains(body, "matches the empty string") {
		t.Fatalf("a rule matching the empty string: load answered %d %q, want a refusal saying it matches the empty string", status, body)
	}
}
