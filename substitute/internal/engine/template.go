package engine

import (
	"fmt"
	"unicode"
	"unicode/utf8"
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
	more  []int  // partGroup: later groups of the same name, tried in turn
}

// template is a parsed replacement.
type template struct {
	parts    []part
	constant []byte // the whole replacement when it has no group or variable
	groups   bool   // uses a group other than $0
}

// parseTemplate parses a replacement. {name} placeholders (letters, digits,
// '.', '_', '-') are resolved per stream through Vars. With dollar (regex
// rules), $ references follow regexp.Expand exactly: $$ is a literal $, and
// $name or ${name} takes the longest run of Unicode letters, digits and
// underscores, so $1é names the group "1é" and $01 the group "01" (write
// ${1}é); a name of digits without a leading zero, below 1e8, is a group
// number; a $ not followed by a name stays literal. Where Expand would
// silently write nothing for a group the pattern does not have, the
// template is refused instead, as that is a typo. Without dollar (literal
// rules), $ is text like any other byte, as in nginx's sub_filter.
// groupIndex resolves a name to the groups that carry it (Go allows a name
// on several groups; Expand writes the first that took part), or nil.
func parseTemplate(s string, dollar bool, groupIndex func(string) []int, varIndex func(string) int) (template, error) {
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
		case dollar && c == '$' && i+1 < len(s) && s[i+1] == '$':
			text = append(text, '$')
			i += 2
		case dollar && c == '$':
			name, n := extractName(s[i+1:])
			if n == 0 {
				text = append(text, '$')
				i++
				continue
			}
			groups := groupIndex(name)
			if groups == nil {
				return t, fmt.Errorf("replacement %q refers to group %q, which the pattern does not have (a name runs to the first byte that is not a letter, digit or _: write ${1}x for group 1 then x, $$ for a literal $)", s, name)
			}
			flush()
			t.parts = append(t.parts, part{kind: partGroup, group: groups[0], more: groups[1:]})
			if groups[0] > 0 {
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

// extractName reads the name after a '$' as regexp.Expand does: "{name}"
// or a run of Unicode letters, digits and '_'. It returns the name and the
// bytes consumed (0 if none).
func extractName(s string) (string, int) {
	brace := len(s) > 0 && s[0] == '{'
	i := 0
	if brace {
		i = 1
	}
	start := i
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' {
			break
		}
		i += size
	}
	if i == start {
		return "", 0
	}
	name := s[start:i]
	if brace {
		if i >= len(s) || s[i] != '}' {
			return "", 0
		}
		i++
	}
	return name, i
}

// isNameByte reports whether c may be part of a {placeholder} name with
// isPlaceholderByte: [A-Za-z0-9_], the same bytes as \w.
func isNameByte(c byte) bool { return isWordByte(c) }

func isPlaceholderByte(c byte) bool {
	return isNameByte(c) || c == '.' || c == '-'
}

// groupNumber resolves a name against a pattern's numbered and named groups
// as regexp.Expand does: ASCII digits without a leading zero, below 1e8, are
// a group number; anything else is a name, which several groups may carry.
// It returns nil if no group answers to the name.
func groupNumber(name string, numGroups int, names []string) []int {
	if n := expandNumber(name); n >= 0 {
		if n <= numGroups {
			return []int{n}
		}
		return nil
	}
	var groups []int
	for i, nm := range names {
		if nm == name && i > 0 {
			groups = append(groups, i)
		}
	}
	return groups
}

// expandNumber is regexp.Expand's reading of a name as a group number, or -1.
func expandNumber(name string) int {
	num := 0
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || '9' < name[i] || num >= 1e8 {
			return -1
		}
		num = num*10 + int(name[i]-'0')
	}
	if len(name) > 1 && name[0] == '0' {
		return -1
	}
	return num
}
