package bundle

import (
	"reflect"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/dotenv"
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
	// one key a line, sorted; a value with anything but plain characters double-quoted, its
	// `$` doubled so that compose reads it literally
	want := "KEY=\"s3cr3t$$val\"\nLIT=\"$${KEY}\"\nPLAIN=x\nURL=http://h:80/\n"
	if string(out) != want {
		t.Errorf("Render =\n%s\nwant\n%s", out, want)
	}
}

func TestRenderErrorsNameNotValue(t *testing.T) {
	_, err := Render([]byte("A=${A}\nB=${B}\n"), map[string]string{"A": "nul\x00-SECRET", "B": "ok"})
	if err == nil || !strings.Contains(err.Error(), "A holds a NUL byte") || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("NUL value: err = %v", err)
	}
	_, err = Render([]byte("A=${A}\n"), map[string]string{"A": "latin1 \xe9 SECRET"})
	if err == nil || !strings.Contains(err.Error(), "A is not UTF-8") || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("non-UTF-8 value: err = %v", err)
	}
	_, err = Render([]byte("A=${A}\nZ=${Z}\nY=${Y}\n"), map[string]string{"A": "SECRET"})
	if err == nil || !strings.Contains(err.Error(), "unresolved: Y, Z") || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("unresolved: err = %v", err)
	}
}

// TestRenderWritesWhatComposeReadsBack pins the form of the rendered .env and that compose's
// own .env reader (compose-go's dotenv, with a lookup that would betray any expansion) reads
// back each value exactly, wherever the template puts the reference — including the
// values that used to break out of their line.
func TestRenderWritesWhatComposeReadsBack(t *testing.T) {
	cases := []struct{ tpl, v, want, value string }{
		{"K=${V}", "plain", "K=plain\n", "plain"},
		{"K=${V}", "s3cr3t$val", "K=\"s3cr3t$$val\"\n", "s3cr3t$val"},
		{"K=${V}", "a #b", "K=\"a #b\"\n", "a #b"},
		{"K=${V}", "trail ", "K=\"trail \"\n", "trail "},
		{"K=${V}", "q'uote", "K=\"q'uote\"\n", "q'uote"},
		{"K=${V}", `a$b'c\`, `K="a$$b'c\\"` + "\n", `a$b'c\`},
		{`K="${V}"`, `d"q$x\`, `K="d\"q$$x\\"` + "\n", `d"q$x\`},
		{"K='${V}'", "it's", "K=\"it's\"\n", "it's"},
		{"K=pre-${V}-post", "a$b", "K=\"pre-a$$b-post\"\n", "pre-a$b-post"},
		{"K=pre-${V}", "a #b", "K=\"pre-a #b\"\n", "pre-a #b"},
		{"K=pre-${V}", "trail ", "K=\"pre-trail \"\n", "pre-trail "},
		// a secret that starts with a quote, first in a value followed by text or a comment:
		// it used to close its own quote and set COMPOSE_FILE on the same line
		{"K=${V} # the api key", "'x' COMPOSE_FILE=evil.yaml", "K=\"'x' COMPOSE_FILE=evil.yaml\"\n", "'x' COMPOSE_FILE=evil.yaml"},
		{"K=${V}-suffix", "\"x\" COMPOSE_FILE=evil.yaml #", "K=\"\\\"x\\\" COMPOSE_FILE=evil.yaml #-suffix\"\n", "\"x\" COMPOSE_FILE=evil.yaml #-suffix"},
		{"K=${V}", "multi\nline\r\n\tCOMPOSE_FILE=x", "K=\"multi\nline\r\n\tCOMPOSE_FILE=x\"\n", "multi\nline\r\n\tCOMPOSE_FILE=x"},
		{"K=${V}", `\n\$\0101`, `K="\\n\\$$\\0101"` + "\n", `\n\$\0101`},
		{"K=${V}", "", "K=\"\"\n", ""},
	}
	for _, c := range cases {
		out, err := Render([]byte(c.tpl), map[string]string{"V": c.v})
		if err != nil || string(out) != c.want {
			t.Errorf("Render(%q, %q) = %q, %v; want %q", c.tpl, c.v, out, err, c.want)
			continue
		}
		got, err := dotenv.UnmarshalWithLookup(string(out), func(string) (string, bool) { return "EXPANDED", true })
		if err != nil || len(got) != 1 || got["K"] != c.value {
			t.Errorf("compose reads %q back as %q, %v; want {K: %q}", out, got, err, c.value)
		}
	}
}

// compose-go's typed template errors are read by their type: the words say what is wrong
// without the template text.
func TestTemplateErrorsReadByType(t *testing.T) {
	for tpl, want := range map[string]string{
		"A=x${\n":         "a `${` that compose cannot read",
		"A=${B:?unset}\n": "a `${VAR:?…}` that compose would refuse",
		"A=\"open\n":      "unterminated quoted value",
	} {
		_, err := ParseEnvTemplate([]byte(tpl))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want words saying %q", tpl, err, want)
		}
	}
}
