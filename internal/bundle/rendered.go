package bundle

import (
	"bytes"
	"strings"
)

// RenderedValues returns the values Render put into env at the references of tpl (the release's
// `.env.template` and its rendered `.env`), in the forms compose reads back and the forms
// written, so a process that did not render them can register them with the redactor. A line
// whose literal text does not match the template gives its whole value after `=`.
func RenderedValues(tpl, env []byte) []string {
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s)
		if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
			inner := s[1 : len(s)-1]
			if s[0] == '"' {
				inner = strings.NewReplacer("\\\\", "\\", "\\\"", "\"", "$$", "$").Replace(inner)
			}
			out = append(out, inner)
		} else if u := strings.NewReplacer("\\\\", "\\", "\\\"", "\"", "$$", "$").Replace(s); u != s {
			out = append(out, u) // escaped inside double quotes, or `$$` unquoted
		}
	}
	tl, el := bytes.Split(tpl, []byte("\n")), bytes.Split(env, []byte("\n"))
	for i, t := range tl {
		if i >= len(el) || isComment(t) {
			continue
		}
		r := string(el[i])
		var spans [][2]int
		scanLine(t, func(start, end int, _ string) { spans = append(spans, [2]int{start, end}) })
		if len(spans) == 0 {
			continue
		}
		// the literal pieces around the references: L0 ref L1 ref … Ln
		lits := []string{string(t[:spans[0][0]])}
		for k := 1; k < len(spans); k++ {
			lits = append(lits, string(t[spans[k-1][1]:spans[k][0]]))
		}
		lits = append(lits, string(t[spans[len(spans)-1][1]:]))
		first, last := lits[0], lits[len(lits)-1]
		if !strings.HasPrefix(r, first) || !strings.HasSuffix(r[len(first):], last) {
			if eq := strings.IndexByte(r, '='); eq >= 0 {
				add(strings.TrimSpace(r[eq+1:]))
			}
			continue
		}
		mid := r[len(first) : len(r)-len(last)]
		for k := 1; k < len(spans); k++ {
			sep := lits[k]
			idx := strings.Index(mid, sep)
			if sep == "" || idx < 0 {
				break
			}
			add(mid[:idx])
			mid = mid[idx+len(sep):]
		}
		add(mid)
	}
	return out
}
