package redact

import (
	"math"
	"strings"
	"sync"
	"unicode/utf8"
)

// What a value can become on its way to a sink without being encoded, and how the matcher sees
// through it:
//
//   - re-cased (an error compared without case, a program that upper-cases): patterns and text
//     are compared with ASCII letters folded to lower case;
//   - cut by a line break (a program that wraps its lines, or prints a value in two parts): a
//     raw "\n", "\r\n" or "\r", the same written as escapes (`\n`, `\r\n`, `\\n`: the logger's JSON,
//     sanitize.Line), or " | " (docker.Meaningful's join of the lines), each followed or not by
//     the prefix compose puts on every line it relays (`api-1  | `);
//   - written in JSON's `\uXXXX` escapes, some characters or all (json.Marshal's `\u003c` for
//     <, >, &; a program that escapes everything), with one backslash or several (JSON of JSON),
//     and Go's `\UXXXXXXXX`.
//
// The text is matched folded, where every offset is the text's own, and, when it holds a break,
// an escape or " | ", in its canonical form (folded, escapes decoded, breaks dropped), whose
// matches are mapped back to the text piece by piece: a value cut over two lines is masked on
// both, and the break and the prefix between the pieces stay. A piece is masked only as part of
// a whole value; alone, it is ordinary text. A prefix cannot be told from a line that begins
// with a word, spaces and "|" (compose pads the names to the longest one, so the longest has a
// single space), so the canonical form is taken twice when the text holds such a thing: once
// with the prefix at each line's start dropped, once with it kept. Patterns are registered folded and in
// the canonical form that keeps the prefixes, so that a value that itself holds a break or an
// escape is found either way.

// canonical is a text as the second pass matches it.
type canonical struct {
	orig     string
	b        []byte  // the canonical text
	lo       []int32 // for each byte of b, where in orig the byte or escape it comes from starts
	prefixes bool    // a prefix was dropped
}

// buffers recycles a canonical's slices: they are as long as the text.
var buffers sync.Pool

// special marks the bytes where canon may do more than fold: a break, an escape, " | ".
var special = [256]bool{'\n': true, '\r': true, '\\': true, ' ': true}

// fold lower-cases an ASCII letter.
func fold(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// mayChange reports whether canon could give s anything but its folded self: it holds a line
// break, a backslash or Meaningful's " | ".
func mayChange(s string) bool {
	return strings.ContainsAny(s, "\n\r\\") || strings.Contains(s, " | ")
}

// canon is s folded, with its `\u` escapes decoded and its breaks dropped, and, with prefixes,
// the prefix at the start of each line (the text's start, or after a break); ok is false when
// that leaves s as it is but for case. The caller calls release when done with c.
func canon(s string, prefixes bool) (c canonical, ok bool) {
	if len(s) > math.MaxInt32 || !mayChange(s) {
		return canonical{}, false
	}
	c.orig = s
	if p, _ := buffers.Get().(*canonical); p != nil && cap(p.b) >= len(s) {
		c.b, c.lo = p.b[:len(s)], p.lo[:len(s)]
	} else {
		c.b, c.lo = make([]byte, len(s)), make([]int32, len(s))
	}
	n := 0 // canonical is never longer than s: an escape is longer than what it decodes to
	changed := false
	var enc [utf8.UTFMax]byte
	lineStart := prefixes
	for i := 0; i < len(s); {
		if lineStart {
			lineStart = false
			if k := prefixLen(s, i); k > 0 {
				i += k
				changed, c.prefixes = true, true
				continue
			}
		}
		if !special[s[i]] {
			c.b[n], c.lo[n] = fold(s[i]), int32(i)
			n++
			i++
			continue
		}
		if k := breakToken(s, i); k > 0 {
			i += k
			changed, lineStart = true, prefixes
			continue
		}
		if r, k := unescape(s, i); k > 0 {
			m := utf8.EncodeRune(enc[:], r)
			for _, x := range enc[:m] {
				c.b[n], c.lo[n] = fold(x), int32(i)
				n++
			}
			i += k
			changed = true
			continue
		}
		k := 1
		if s[i] == '\\' {
			k = backslashes(s, i) // neither a break nor an escape: the whole run is text
		}
		for end := i + k; i < end; i++ {
			c.b[n], c.lo[n] = s[i], int32(i)
			n++
		}
	}
	c.b, c.lo = c.b[:n], c.lo[:n]
	if !changed {
		c.release()
		return canonical{}, false
	}
	return c, true
}

// release hands c's slices back for another text.
func (c *canonical) release() {
	if c.b != nil {
		buffers.Put(&canonical{b: c.b[:0], lo: c.lo[:0]})
	}
}

// canonString is s as canon gives it without dropping prefixes, for a pattern.
func canonString(s string) string {
	c, ok := canon(s, false)
	if !ok {
		return asciiLower(s)
	}
	defer c.release()
	return string(c.b)
}

// end is where the byte or escape of orig that canonical byte k comes from ends.
func (c *canonical) end(k int) int32 {
	i := int(c.lo[k])
	if _, n := unescape(c.orig, i); n > 0 {
		return int32(i + n)
	}
	return int32(i + 1)
}

// appendSpans appends the ranges of the original text that the canonical bytes [a, b) stand
// for: one range per run of bytes with nothing dropped between them.
func (c *canonical) appendSpans(sp []span, a, b int) []span {
	lo, hi := c.lo[a], c.end(a)
	for k := a + 1; k < b; k++ {
		if c.lo[k] > hi {
			sp = append(sp, span{int(lo), int(hi)})
			lo = c.lo[k]
		}
		hi = max(hi, c.end(k))
	}
	return append(sp, span{int(lo), int(hi)})
}

// backslashes is the length of the run of backslashes at s[i:].
func backslashes(s string, i int) int {
	n := 0
	for i+n < len(s) && s[i+n] == '\\' {
		n++
	}
	return n
}

// breakToken is the length of one line break at s[i:]: "\n", "\r", a run of backslashes and
// 'n' or 'r', or " | "; 0 if there is none.
func breakToken(s string, i int) int {
	switch s[i] {
	case '\n', '\r':
		return 1
	case ' ':
		if strings.HasPrefix(s[i:], " | ") {
			return 3
		}
	case '\\':
		if k := backslashes(s, i); i+k < len(s) && (s[i+k] == 'n' || s[i+k] == 'r') {
			return k + 1
		}
	}
	return 0
}

// prefixLen is the length of the prefix compose relays a service's line with at s[i:] (a
// container or service name, one or more spaces, "|" and a space: `api-1  | `); 0 if there is
// none.
func prefixLen(s string, i int) int {
	j := i
	for j < len(s) && j-i < 128 && (isAlnum(s[j]) || s[j] == '-' || s[j] == '_' || s[j] == '.') {
		j++
	}
	if j == i {
		return 0
	}
	k := j
	for k < len(s) && s[k] == ' ' {
		k++
	}
	if k == j || k >= len(s) || s[k] != '|' {
		return 0
	}
	k++
	if k < len(s) && s[k] == ' ' {
		k++
	}
	return k - i
}

// unescape decodes the escape at s[i:]: a run of backslashes and `u` with four hex digits (a
// UTF-16 surrogate pair as two such escapes) or `U` with eight. n is 0 when there is none.
func unescape(s string, i int) (r rune, n int) {
	k := backslashes(s, i)
	if k == 0 || i+k >= len(s) {
		return 0, 0
	}
	j := i + k
	switch s[j] {
	case 'u':
		v, ok := hexAt(s, j+1, 4)
		if !ok {
			return 0, 0
		}
		if v >= 0xd800 && v < 0xdc00 { // a high surrogate: its low one must follow
			k2 := backslashes(s, j+5)
			if k2 == 0 || j+5+k2 >= len(s) || s[j+5+k2] != 'u' {
				return 0, 0
			}
			lo, ok := hexAt(s, j+5+k2+1, 4)
			if !ok || lo < 0xdc00 || lo >= 0xe000 {
				return 0, 0
			}
			return 0x10000 + (v-0xd800)<<10 + (lo - 0xdc00), j + 5 + k2 + 5 - i
		}
		if v >= 0xdc00 && v < 0xe000 {
			return 0, 0
		}
		return v, j + 5 - i
	case 'U':
		v, ok := hexAt(s, j+1, 8)
		if !ok || !utf8.ValidRune(v) {
			return 0, 0
		}
		return v, j + 9 - i
	}
	return 0, 0
}

// hexAt is the value of the n hex digits at s[i:].
func hexAt(s string, i, n int) (rune, bool) {
	if i+n > len(s) {
		return 0, false
	}
	var v rune
	for _, c := range []byte(s[i : i+n]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
