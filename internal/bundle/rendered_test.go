package bundle

import (
	"slices"
	"testing"
)

func TestRenderedValuesGivesBackWhatRenderPutIn(t *testing.T) {
	tpl := []byte("# ${NOT_ONE}\nA=${A}\nB=\"pre ${B} post\"\nC=x${C}y${D}z\nE='${E}'\nPLAIN=v1\nF=${F}\nG=${G} # a comment\n")
	vals := map[string]string{"A": "alpha-secret", "B": `b"quoted$`, "C": "c-part", "D": "d-part", "E": "e secret", "F": "has space #x", "G": `'x' COMPOSE_FILE=evil.yaml \$`}
	env, err := Render(tpl, vals)
	if err != nil {
		t.Fatal(err)
	}
	got := RenderedValues(tpl, env)
	for _, v := range vals {
		if !slices.Contains(got, v) {
			t.Errorf("%q not among %q", v, got)
		}
	}
	if slices.Contains(got, "v1") {
		t.Errorf("a literal value is not a secret: %q", got)
	}
}
