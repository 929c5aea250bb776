package engine

import (
	"fmt"
	"strconv"
)

// Kinds of template parts.
const (
	partText  uint8 = iota // literal text
	partGroup              // capture group (0 = whole match)
	partVar                // {name}, resolved per stream through Vars
)

type part struct {
	kind  uint8
	text  string // partText: the text; partVar: "{name}" as written
	group int    // partGroup: group number; partVar: index in Set.varNames
}

// template is a parsed replacement.
type template struct {
	parts    []part
	constant []byte // the whole replacement when it has no group or variable
	groups   bool   // uses a group other than $0
}

// parseTemplate parses a replacement: $1, ${1}, $name, ${name} (Go's
// regexp.Expand syntax: a name is the longest run of letters, digits and
// underscores), $$ for a literal $, and {name} placeholders (letters,
// digits, '.', '_', '-'). A $ not followed by one of these stays literal.
// groupIndex resolves a group name or number, returning -1 if unknown.
func parseTemplate(s string, groupIndex func(string) int, varIndex func(string) int) (template, error) {
	var t template
	var text []byte
	flush := func() {
		if len(text) > 0 {
			t.parts = append(t.parts, part{kind: partText, text: string(text)})
			text = text[:0]
		}
	}
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '$' && i+1 < len(s) && s[i+1] == '$':
			text = append(text, '$')
			i += 2
		case c == '$':
			name, n := extractName(s[i+1:])
			if n == 0 {
				text = append(text, '$')
				i++
				continue
			}
			g := groupIndex(name)
			if g < 0 {
				return t, fmt.Errorf("replacement %q refers to group %q, which the pattern does not have", s, name)
			}
			flush()
			t.parts = append(t.parts, part{kind: partGroup, group: g})
			if g > 0 {
				t.groups = true
			}
			i += 1 + n
		case c == '{':
			j := i + 1
			for j < len(s) && isPlaceholderByte(s[j]) {
				j++
			}
			if j == i+1 || j >= len(s) || s[j] != '}' {
				text = append(text, c)
				i++
				continue
			}
			flush()
			t.parts = append(t.parts, part{kind: partVar, text: s[i : j+1], group: varIndex(s[i+1 : j])})
			i = j + 1
		default:
			text = append(text, c)
			i++
		}
	}
	flush()
	if len(t.parts) == 0 {
		t.constant = []byte{}
	} else if len(t.parts) == 1 && t.parts[0].kind == partText {
		t.constant = []byte(t.parts[0].text)
	}
	return t, nil
}

// extractName reads the name after a '$': "{name}" or a run of
// [A-Za-z0-9_]. It returns the name and the bytes consumed (0 if none).
func extractName(s string) (string, int) {
	if len(s) > 0 && s[0] == '{' {
		j := 1
		for j < len(s) && isNameByte(s[j]) {
			j++
		}
		if j == 1 || j >= len(s) || s[j] != '}' {
			return "", 0
		}
		return s[1:j], j + 1
	}
	j := 0
	for j < len(s) && isNameByte(s[j]) {
		j++
	}
	return s[:j], j
}

// isNameByte reports whether c may be part of a group name: [A-Za-z0-9_],
// the same bytes as \w.
func isNameByte(c byte) bool { return isWordByte(c) }

func isPlaceholderByte(c byte) bool {
	return isNameByte(c) || c == '.' || c == '-'
}

// groupNumber resolves name against a pattern's numbered and named groups.
func groupNumber(name string, numGroups int, names []string) int {
	if n, err := strconv.Atoi(name); err == nil {
		if n >= 0 && n <= numGroups && name[0] != '+' && name[0] != '-' {
			return n
		}
		return -1
	}
	for i, nm := range names {
		if nm == name && i > 0 {
			return i
		}
	}
	return -1
}
