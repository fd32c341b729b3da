package bundle

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
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

// Render substitutes every reference outside comment lines with its value. Comment lines,
// `$$` and everything else are kept as written. A value holding a newline or a carriage
// return is an error naming the variable; references without a value are an error naming
// them ("unresolved: A, B"). Errors never carry a value.
func Render(tpl []byte, values map[string]string) ([]byte, error) {
	var out bytes.Buffer
	out.Grow(len(tpl))
	unresolved := map[string]bool{}
	var badValue []string
	lines := bytes.Split(tpl, []byte("\n"))
	for li, line := range lines {
		if li > 0 {
			out.WriteByte('\n')
		}
		if isComment(line) {
			out.Write(line)
			continue
		}
		last := 0
		scanLine(line, func(start, end int, name string) {
			v, ok := values[name]
			if !ok {
				unresolved[name] = true
				return
			}
			if strings.ContainsAny(v, "\n\r") {
				badValue = append(badValue, name)
				return
			}
			ev, ok := envValue(line, start, end, v)
			if !ok {
				badValue = append(badValue, name)
				return
			}
			out.Write(line[last:start])
			out.WriteString(ev)
			last = end
		})
		out.Write(line[last:])
	}
	if len(badValue) > 0 {
		sort.Strings(badValue)
		return nil, fmt.Errorf("render %s: the value of %s cannot be written where the template puts it (a line break, a quote inside single quotes, or \" #\" or edge blanks in an unquoted value): quote the reference in the template", TemplateFile, strings.Join(uniq(badValue), ", "))
	}
	if len(unresolved) > 0 {
		names := make([]string, 0, len(unresolved))
		for n := range unresolved {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("render %s: unresolved: %s", TemplateFile, strings.Join(names, ", "))
	}
	return out.Bytes(), nil
}

func uniq(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// envValue is v written so that compose's .env reader gives back exactly v at the reference
// [start, end) of line. Compose expands `$` in unquoted and double-quoted values, cuts an
// unquoted value at " #" and trims its trailing blanks, and unescapes `\` sequences in double
// quotes; single quotes are literal. So:
//   - a reference that is a whole unquoted value is single-quoted when v holds a character
//     compose would change (double-quoted, escaped, when v holds a single quote or ends in `\`);
//   - inside double quotes `\`, `"` and `$` are escaped;
//   - elsewhere unquoted, `$` is written `$$`;
//   - inside single quotes v goes as is, and cannot hold a single quote (ok false).
func envValue(line []byte, start, end int, v string) (string, bool) {
	eq := bytes.IndexByte(line[:start], '=')
	if eq < 0 {
		return strings.ReplaceAll(v, "$", "$$"), true
	}
	// the quote state at the reference, scanning the value from after `=`
	valStart := eq + 1
	for valStart < start && (line[valStart] == ' ' || line[valStart] == '\t') {
		valStart++
	}
	var quote byte
	for i := valStart; i < start; i++ {
		c := line[i]
		switch {
		case quote == '"' && c == '\\':
			i++
		case quote == 0 && i == valStart && (c == '\'' || c == '"'):
			quote = c
		case quote != 0 && c == quote:
			quote = 0
		}
	}
	switch quote {
	case '\'':
		if strings.Contains(v, "'") || strings.HasSuffix(v, "\\") {
			return "", false
		}
		return v, true
	case '"':
		r := strings.NewReplacer("\\", "\\\\", "\"", "\\\"", "$", "$$")
		return r.Replace(v), true
	}
	whole := start == valStart && len(bytes.TrimRight(line[end:], " \t")) == 0
	if whole && needsQuotes(v) {
		if !strings.Contains(v, "'") && !strings.HasSuffix(v, "\\") {
			return "'" + v + "'", true
		}
		r := strings.NewReplacer("\\", "\\\\", "\"", "\\\"", "$", "$$")
		return "\"" + r.Replace(v) + "\"", true
	}
	// part of an unquoted value: compose would cut it at " #" and trim blanks at its ends
	if strings.Contains(v, " #") || strings.Contains(v, "\t#") ||
		(start == valStart && strings.TrimLeft(v, " \t") != v) ||
		(len(bytes.TrimRight(line[end:], " \t")) == 0 && strings.TrimRight(v, " \t") != v) {
		return "", false
	}
	return strings.ReplaceAll(v, "$", "$$"), true
}

// needsQuotes reports whether compose would read v back changed as an unquoted value.
func needsQuotes(v string) bool {
	if v == "" {
		return false
	}
	if strings.ContainsAny(v, "$#'\"\\") {
		return true
	}
	return strings.TrimSpace(v) != v
}
