// Package shline reads a printed shell line the way bash does, as far as a fix line needs: its
// code and its comment, and the simple commands of its code. Quotes, backslashes and $( ) are
// respected; nothing is expanded.
package shline

import "strings"

// Split splits line into its code and its comment: the comment begins at the `#` that begins a
// word outside quotes and holds the blanks before it; "" when there is none.
func Split(line string) (code, comment string) {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\\':
			i++
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || strings.IndexByte(" \t;&|(", line[i-1]) >= 0):
			j := i
			for j > 0 && (line[j-1] == ' ' || line[j-1] == '\t') {
				j--
			}
			return line[:j], line[j:]
		}
	}
	return line, ""
}

// Segment is one simple command of a line's code and the separator before it ("" for the
// first).
type Segment struct{ Sep, Text string }

// Commands splits code at the shell's separators (&&, ||, ;, |) outside quotes and $( ); the
// segments joined with their separators are code again.
func Commands(code string) []Segment {
	var out []Segment
	sep, start, depth := "", 0, 0
	var quote byte
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
			continue
		case c == '\\':
			i++
			continue
		case c == '\'' || c == '"':
			quote = c
			continue
		case c == '$' && i+1 < len(code) && code[i+1] == '(':
			depth++
			i++
			continue
		case c == ')' && depth > 0:
			depth--
			continue
		case depth > 0:
			continue
		}
		n := 0
		switch {
		case strings.HasPrefix(code[i:], "&&"), strings.HasPrefix(code[i:], "||"):
			n = 2
		case c == ';' || c == '|':
			n = 1
		}
		if n > 0 {
			out = append(out, Segment{sep, code[start:i]})
			sep, start = code[i:i+n], i+n
			i += n - 1
		}
	}
	return append(out, Segment{sep, code[start:]})
}

// Start is a simple command's text without the blanks and group openers ({, () before it.
func Start(text string) string {
	return strings.TrimLeft(text, " \t({")
}
