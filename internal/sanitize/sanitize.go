// Package sanitize makes strings from the outside world — tenancy's answers, compose's
// output, names from a bundle — safe to print on a terminal, write to the journal or send
// in a report: every control character is escaped, never emitted raw. It only rewrites
// strings; it decides nothing and masks no secret (that is the redactor's job).
package sanitize

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Line returns s as one printable line: C0 and C1 control characters (line breaks and tabs
// included), DEL, the Unicode bidirectional overrides and isolates, and bytes that are not
// UTF-8 are written as Go escapes (\x1b, \n, \u202e, \xff). Anything else is kept as is.
func Line(s string) string { return clean(s, false) }

// Text is Line that keeps line breaks and tabs, for multi-line text such as a log tail.
// A carriage return is escaped (it redraws a terminal line).
func Text(s string) string { return clean(s, true) }

func clean(s string, keepLines bool) string {
	if safe(s, keepLines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(s[i])&0xf, 16))
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r) // '\x1b', '\n', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func safe(s string, keepLines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return false // decide rune by rune
		}
		if c < 0x20 || c == 0x7f {
			if keepLines && (c == '\n' || c == '\t') {
				continue
			}
			return false
		}
	}
	return true
}

func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true // bidi controls: they reorder what a terminal shows
	case r == 0x2028, r == 0x2029:
		return true // line and paragraph separators
	}
	return false
}

// ShellWord returns s as one POSIX shell word, for a command a person pastes: as it is when the
// shell reads nothing in it, else in single quotes (a quote inside written '\”). A path with a
// space stays one argument: `rm -rf '/srv/monky deploy'`, never `rm -rf /srv/monky deploy`.
func ShellWord(s string) string {
	if s == "" {
		return "''"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("/._-+:@%=,", c) >= 0) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
