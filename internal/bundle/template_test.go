package bundle

import (
	"reflect"
	"strings"
	"testing"
)

func TestReferences(t *testing.T) {
	tpl := "# The renderer substitutes every ${VAR}\n  # indented ${ALSO_COMMENT}\n" +
		"A=${ALPHA}\nB=prefix-${BETA}-${ALPHA}\nC=$${LITERAL}\nD=$$${AFTER_ESC}\nE=${}\nF=${1BAD}\nG=${OK_2}x${ unclosed\nH=$NOBRACE\n"
	got := References([]byte(tpl))
	want := []string{"AFTER_ESC", "ALPHA", "BETA", "OK_2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("References = %q, want %q", got, want)
	}
	if got := References(nil); len(got) != 0 {
		t.Errorf("References(nil) = %q", got)
	}
}

func TestRender(t *testing.T) {
	tpl := "# substitutes every ${VAR}\nKEY=${KEY}\nURL=http://${HOST}:${PORT}/\nLIT=$${KEY}\nPLAIN=x\n"
	out, err := Render([]byte(tpl), map[string]string{"KEY": "s3cr3t$val", "HOST": "h", "PORT": "80", "VAR": "never"})
	if err != nil {
		t.Fatal(err)
	}
	// compose expands `$` in an unquoted .env value: the secret is single-quoted to stay literal
	want := "# substitutes every ${VAR}\nKEY='s3cr3t$val'\nURL=http://h:80/\nLIT=$${KEY}\nPLAIN=x\n"
	if string(out) != want {
		t.Errorf("Render =\n%s\nwant\n%s", out, want)
	}
}

func TestRenderErrorsNameNotValue(t *testing.T) {
	_, err := Render([]byte("A=${A}\nB=${B}\n"), map[string]string{"A": "line1\nline2-SECRET", "B": "ok"})
	if err == nil || !strings.Contains(err.Error(), "A") || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("newline value: err = %v", err)
	}
	_, err = Render([]byte("A=${A}\nZ=${Z}\nY=${Y}\n"), map[string]string{"A": "SECRET"})
	if err == nil || !strings.Contains(err.Error(), "unresolved: Y, Z") || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("unresolved: err = %v", err)
	}
}

// TestRenderWritesWhatComposeReadsBack pins the escaping that makes compose's .env reader
// (compose-go's dotenv: `$` expanded outside single quotes, unquoted values cut at " #" and
// trimmed, `\` sequences unescaped in double quotes) give back each value exactly. The wanted
// lines were checked against that reader.
func TestRenderWritesWhatComposeReadsBack(t *testing.T) {
	cases := []struct{ tpl, v, want string }{
		{"K=${V}", "plain", "K=plain"},
		{"K=${V}", "s3cr3t$val", "K='s3cr3t$val'"},
		{"K=${V}", "a #b", "K='a #b'"},
		{"K=${V}", "trail ", "K='trail '"},
		{"K=${V}", "q'uote", `K="q'uote"`},
		{"K=${V}", `a$b'c\`, `K="a$$b'c\\"`},
		{"K=${V}", `end\`, `K="end\\"`},
		{`K="${V}"`, `d"q$x\`, `K="d\"q$$x\\"`},
		{"K='${V}'", "raw$x", "K='raw$x'"},
		{"K=pre-${V}-post", "a$b", "K=pre-a$$b-post"},
	}
	for _, c := range cases {
		out, err := Render([]byte(c.tpl), map[string]string{"V": c.v})
		if err != nil || string(out) != c.want {
			t.Errorf("Render(%q, %q) = %q, %v; want %q", c.tpl, c.v, out, err, c.want)
		}
	}
	for _, c := range []struct{ tpl, v string }{{"K='${V}'", "it's"}, {"K=pre-${V}", "a #b"}, {"K=pre-${V}", "trail "}} {
		if _, err := Render([]byte(c.tpl), map[string]string{"V": c.v}); err == nil || strings.Contains(err.Error(), c.v) {
			t.Errorf("Render(%q, secret) = %v; want an error naming V, not the value", c.tpl, err)
		}
	}
}
