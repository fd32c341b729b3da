package bundle

import (
	"github.com/tikali/monky-deployd/internal/testkit"

	"sort"
	"strings"
	"testing"
)

const fuzzMax = 64 << 10

func FuzzRead(f *testing.F) {
	f.Add(testkit.Tar(f, validEntries("env-qa-02", testkit.TarFile("config/a.toml", "a=1\n"))...))
	f.Add(testkit.Gzip(f, testkit.Tar(f, validEntries("env-qa-02")...)))
	f.Add([]byte{})
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Read(data, fuzzMax)
		if err != nil {
			if _, ok := err.(*Refusal); !ok {
				t.Fatalf("error is %T, want *Refusal", err)
			}
			return
		}
		var total int64
		for name, body := range b.Files {
			total += int64(len(body))
			if badName(name) != "" {
				t.Fatalf("accepted name %q", name)
			}
		}
		if total > fuzzMax {
			t.Fatalf("files total %d > %d", total, fuzzMax)
		}
		if len(b.Files)+len(b.Dirs) > MaxEntries {
			t.Fatalf("%d entries", len(b.Files)+len(b.Dirs))
		}
		if b.Sha != Sha(b.Files) {
			t.Fatalf("sha drift")
		}
	})
}

func FuzzReferences(f *testing.F) {
	for _, s := range []string{"# ${VAR}\nA=${A}\n", "$${X}", "A=${A}${B}$$${C}", "${", "$", "  #${X}\n${Y_1}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tpl string) {
		refs := References([]byte(tpl))
		if !sort.StringsAreSorted(refs) {
			t.Fatalf("not sorted: %q", refs)
		}
		values := map[string]string{}
		for i, r := range refs {
			if !ValidName(r) {
				t.Fatalf("invalid name %q", r)
			}
			if i > 0 && refs[i-1] == r {
				t.Fatalf("duplicate %q", r)
			}
			// "-" cannot be part of a name, so a substitution can never complete a new
			// reference (as "${${A}}" with A=v would: "${v}").
			values[r] = "-"
		}
		out, err := Render([]byte(tpl), values)
		if _, perr := ParseEnvTemplate([]byte(tpl)); perr != nil {
			if err == nil {
				t.Fatalf("rendered a template compose cannot read (%v)", perr)
			}
			return
		}
		if err != nil {
			t.Fatalf("render with every value: %v", err)
		}
		if left := References(out); len(left) != 0 {
			t.Fatalf("references left after render: %q", left)
		}
		if len(refs) > 0 {
			delete(values, refs[0])
			if _, err := Render([]byte(tpl), values); err == nil || !strings.Contains(err.Error(), refs[0]) {
				t.Fatalf("missing %s: err = %v", refs[0], err)
			}
		}
	})
}
