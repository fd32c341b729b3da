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
	want := "# substitutes every ${VAR}\nKEY=s3cr3t$val\nURL=http://h:80/\nLIT=$${KEY}\nPLAIN=x\n"
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
