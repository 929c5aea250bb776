package substitute

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/caddy-edgekit/edgekit/substitute/internal/engine"

	"github.com/caddy-edgekit/edgekit/internal/enum"
)

// Each bound and enumeration is checked by one function here, called by both
// the Caddyfile parser (so `caddy adapt` points at the offending line) and
// Validate (for JSON configs), so the two can never disagree.

// Priority chooses between matches that start at the same position. In JSON
// it is the plain string.
type Priority string

// Priorities.
const (
	// PriorityLongest takes the longest match, then the rule declared first.
	PriorityLongest Priority = "longest"
	// PriorityFirst takes the rule declared first, as nginx's replace_filter.
	PriorityFirst Priority = "first"
)

func parsePriority(s string) (Priority, error) {
	v, err := enum.Parse(s, PriorityLongest, PriorityFirst)
	if err != nil {
		return "", fmt.Errorf("substitute: priority %w", err)
	}
	return v, nil
}

func checkRuleCount(n int) error {
	if n == 0 {
		return fmt.Errorf("substitute: no rules: add at least one replace or regex rule")
	}
	return nil
}

func checkMaxMatch(n int) error {
	if n < minMaxMatch || n > maxMaxMatch {
		return fmt.Errorf("substitute: max_match %d: must be %d..%d bytes (the longest match to replace); leave it out for the default %d", n, minMaxMatch, maxMaxMatch, engine.DefaultMaxMatch)
	}
	return nil
}

// checkRule refuses a literal that could never be replaced whole.
func checkRule(i int, r Rule, maxMatch int) error {
	if !r.Regex && len(r.Find) > maxMatch {
		return fmt.Errorf("substitute: rule %d: literal %q is longer than max_match %d: raise max_match", i+1, r.Find, maxMatch)
	}
	return nil
}

// compileRule compiles r alone, for the errors that belong to one rule (a
// pattern that does not parse, one that can match the empty string, a
// replacement naming a missing group), numbered as rule i+1.
func compileRule(i int, r Rule) error {
	_, err := engine.Compile([]engine.Rule{{Pattern: r.Find, Literal: !r.Regex, Replacement: r.Replace}}, engine.Options{})
	if err != nil {
		// The engine numbers the rules of the set it was given: this one.
		return fmt.Errorf("substitute: rule %d: %s", i+1, strings.TrimPrefix(err.Error(), "rule 1: "))
	}
	return nil
}

// checkMemo accepts a number of entries or MemoOff (0, the default, is
// replaced by Provision before Validate runs).
func checkMemo(n int) error {
	if n != MemoOff && (n < 1 || n > maxMemo) {
		return fmt.Errorf("substitute: memo %d: must be 1..%d entries, or off", n, maxMemo)
	}
	return nil
}

// parseMemo reads the Caddyfile's `memo <entries>|off`.
func parseMemo(s string) (int, error) {
	if s == "off" {
		return MemoOff, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n == MemoOff {
		return 0, fmt.Errorf("substitute: memo %q: must be a number of entries or off", s)
	}
	return n, checkMemo(n)
}

func checkType(t string) error {
	typ, sub, ok := strings.Cut(t, "/")
	if !ok || typ == "" || sub == "" || typ == "*" || strings.ContainsAny(t, "; \t") {
		return fmt.Errorf("substitute: type %q: must be a media type such as text/html or text/*, without parameters", t)
	}
	return nil
}

// checkStatus accepts a code 100..599 or a class 1..5 (nxx).
func checkStatus(s int) error {
	if !(s >= 1 && s <= 5) && !(s >= 100 && s <= 599) {
		return fmt.Errorf("substitute: status %d: must be a code 100..599 or a class 1..5 (2xx)", s)
	}
	return nil
}

// parseStatus reads "404" as 404 and "4xx" as the class 4. A bare digit is
// refused: in the Caddyfile classes are written nxx.
func parseStatus(s string) (int, error) {
	if len(s) == 3 && strings.EqualFold(s[1:], "xx") && s[0] >= '1' && s[0] <= '5' {
		return int(s[0] - '0'), nil
	}
	code, err := strconv.Atoi(s)
	if err != nil || code < 100 {
		return 0, fmt.Errorf("substitute: status %q: must be a code such as 200 or a class such as 2xx", s)
	}
	return code, checkStatus(code)
}
