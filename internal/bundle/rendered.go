package bundle

import (
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
)

// RenderedValues returns the values Render put into env at the references of tpl (the release's
// `.env.template` and its rendered `.env`), so a process that did not render them can register
// them with the redactor: each secret as compose reads it back, and as it is written in `.env`
// when that differs. It reads `.env` with compose's own reader and cuts each value at the
// template's literal text around the references; where that text cannot be found, the whole
// value is returned. Nothing is returned for a template or a `.env` that does not read.
func RenderedValues(tpl, env []byte) []string {
	t, err := ParseEnvTemplate(tpl)
	if err != nil {
		return nil
	}
	vals, err := dotenv.UnmarshalBytesWithLookup(env, nil)
	if err != nil {
		return nil
	}
	defer clear(vals)
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s)
		if q := envQuote(s); q != s && len(q) >= 2 {
			out = append(out, q[1:len(q)-1]) // as written inside the double quotes
		}
	}
	re := t.markerRE()
	for _, k := range t.Keys() {
		tv := t.values[k]
		v, ok := vals[k]
		locs := re.FindAllStringIndex(tv, -1)
		if !ok || len(locs) == 0 {
			continue // a literal value is not a secret
		}
		// the literal pieces around the references: L0 ref L1 ref … Ln
		lits := []string{tv[:locs[0][0]]}
		for i := 1; i < len(locs); i++ {
			lits = append(lits, tv[locs[i-1][1]:locs[i][0]])
		}
		lits = append(lits, tv[locs[len(locs)-1][1]:])
		first, last := lits[0], lits[len(lits)-1]
		if !strings.HasPrefix(v, first) || len(v) < len(first)+len(last) || !strings.HasSuffix(v[len(first):], last) {
			add(v)
			continue
		}
		mid := v[len(first) : len(v)-len(last)]
		for i := 1; i < len(locs); i++ {
			sep := lits[i]
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
