package bundle

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/compose-spec/compose-go/v2/dotenv"
)

// composeReads is compose's own reading of a .env (compose-go dotenv), with a lookup that
// answers for every name: an expansion the renderer failed to prevent shows as "EXPANDED".
func composeReads(env []byte) (map[string]string, error) {
	return dotenv.UnmarshalWithLookup(string(env), func(string) (string, bool) { return "EXPANDED", true })
}

// envShapes are the places a template puts a reference; want gives the value compose must
// read back for the secret v.
var envShapes = []struct {
	line string
	want func(v string) string
}{
	{"%s=${S}", func(v string) string { return v }},
	{`%s="${S}"`, func(v string) string { return v }},
	{"%s='${S}'", func(v string) string { return v }},
	{"%s=${S} # a comment", func(v string) string { return v }},
	{"%s=pre-${S}-post", func(v string) string { return "pre-" + v + "-post" }},
	{`%s="a ${S} b"`, func(v string) string { return "a " + v + " b" }},
	{"export %s=${S}", func(v string) string { return v }},
	{"%s: ${S}", func(v string) string { return v }},
}

// FuzzEnvRoundTrip: for an arbitrary key and secret value, placed anywhere a template puts a
// reference, compose's dotenv reads back exactly the template's key with exactly the value —
// or the renderer refused, and only for a value compose cannot carry (NUL, not UTF-8).
func FuzzEnvRoundTrip(f *testing.F) {
	for _, v := range []string{"plain", `'leading quote`, `"dq" # not a comment`, `$HOME ${X} $$`, `back\slash\`, "a\nCOMPOSE_FILE=evil.yaml", "\x00", "\xff"} {
		f.Add("API_KEY", v, uint8(0))
	}
	f.Fuzz(func(t *testing.T, key, v string, shape uint8) {
		if !ValidName(key) || strings.HasPrefix(strings.ToUpper(key), "COMPOSE_") || strings.HasPrefix(strings.ToUpper(key), "DOCKER_") {
			key = "K_" + fmt.Sprintf("%x", key)
			if len(key) > 40 {
				key = key[:40]
			}
		}
		s := envShapes[int(shape)%len(envShapes)]
		tpl := fmt.Sprintf(s.line, key) + "\n"
		out, err := Render([]byte(tpl), map[string]string{"S": v})
		if err != nil {
			if strings.IndexByte(v, 0) < 0 && utf8.ValidString(v) {
				t.Fatalf("refused %q in %q: %v", v, tpl, err)
			}
			if strings.Contains(err.Error(), v) && v != "" {
				t.Fatalf("the error quotes the value: %v", err)
			}
			return
		}
		got, err := composeReads(out)
		if err != nil {
			t.Fatalf("compose cannot read %q: %v", out, err)
		}
		if len(got) != 1 || got[key] != s.want(v) {
			t.Fatalf("template %q, value %q: rendered %q, compose reads %q; want {%s: %q}", tpl, v, out, got, key, s.want(v))
		}
	})
}

// FuzzEnvTemplate: for an arbitrary template and two secrets, the rendered .env read by
// compose's dotenv holds exactly the keys and values compose reads from the template itself
// when each reference is replaced by a token it keeps as is, with the secret in its place.
func FuzzEnvTemplate(f *testing.F) {
	f.Add("# substitutes every ${A}\nA=${A}\nB=\"x ${B}\" # c\nC='${A}'\nD=$${A}\nE=pre${A}${B}post", "v'1 #", `v"2\`)
	f.Add("A=1\nB=$A\nC=${C:-${A}}", "x", "y")
	f.Fuzz(func(t *testing.T, tpl, a, b string) {
		values := map[string]string{}
		for i, n := range References([]byte(tpl)) {
			values[n] = []string{a, b}[i%2]
		}
		out, err := Render([]byte(tpl), values)
		// compose's own reading of the template, each reference a token of letters
		tokens := map[string]string{}
		src := replaceRefs(tpl, func(name string) string {
			tok := fmt.Sprintf("QZXTOKEN%dQZX", len(tokens))
			tokens[tok] = values[name]
			return tok
		})
		want, perr := dotenv.UnmarshalWithLookup(src, func(string) (string, bool) { return "", false })
		if err != nil {
			if perr == nil && strings.IndexByte(a+b, 0) < 0 && utf8.ValidString(a) && utf8.ValidString(b) && !strings.Contains(tpl, "QZXTOKEN") {
				if _, terr := ParseEnvTemplate([]byte(tpl)); terr == nil {
					t.Fatalf("refused a template compose reads, with carriable values: %v", err)
				}
			}
			return
		}
		if perr != nil || strings.Contains(tpl, "QZXTOKEN") {
			return // the template holds the test's own token: its reading is not the reference
		}
		for k, v := range want {
			for tok, val := range tokens {
				v = strings.ReplaceAll(v, tok, val)
			}
			want[k] = v
		}
		got, err := composeReads(out)
		if err != nil {
			t.Fatalf("compose cannot read the rendered .env %q: %v", out, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("template %q:\nrendered %q\ncompose reads %q\nwant %q", tpl, out, got, want)
		}
	})
}
