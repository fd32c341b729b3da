package bundle

import (
	"bytes"
	"sort"
)

// A reference in `.env.template` is `${NAME}` with NAME = [A-Za-z_][A-Za-z0-9_]*, outside
// comment lines (first non-blank character `#`). `$$` is compose's escape for a literal `$`,
// so `$${X}` is written as it is and is not a reference.

func isComment(line []byte) bool {
	t := bytes.TrimLeft(line, " \t")
	return len(t) > 0 && t[0] == '#'
}

func nameStart(c byte) bool { return c == '_' || (c|0x20) >= 'a' && (c|0x20) <= 'z' }
func nameByte(c byte) bool  { return nameStart(c) || c >= '0' && c <= '9' }

// ValidName reports whether s is a variable name: [A-Za-z_][A-Za-z0-9_]*.
func ValidName(s string) bool {
	if s == "" || !nameStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

// scanLine calls fn for every reference in one non-comment line with the reference's byte
// span [start, end) and its name; every other byte is left to the caller.
func scanLine(line []byte, fn func(start, end int, name string)) {
	for i := 0; i < len(line); i++ {
		if line[i] != '$' || i+1 >= len(line) {
			continue
		}
		switch line[i+1] {
		case '$':
			i++ // `$$`: a literal `$`, whatever follows
		case '{':
			j := i + 2
			for j < len(line) && nameByte(line[j]) {
				j++
			}
			if j < len(line) && line[j] == '}' && j > i+2 && nameStart(line[i+2]) {
				fn(i, j+1, string(line[i+2:j]))
				i = j
			}
		}
	}
}

// References returns the names `.env.template` references, sorted and unique.
func References(tpl []byte) []string {
	set := map[string]bool{}
	for _, line := range bytes.Split(tpl, []byte("\n")) {
		if isComment(line) {
			continue
		}
		scanLine(line, func(_, _ int, name string) { set[name] = true })
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
