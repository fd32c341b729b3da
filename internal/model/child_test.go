package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tikali/monky-deployd/internal/vocab"
)

// ask has the child's serve answer req for a release holding content as its compose file.
func ask(t *testing.T, req Request, content string) Answer {
	t.Helper()
	rel := t.TempDir()
	if err := os.WriteFile(filepath.Join(rel, "compose.yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	req.V, req.Rel, req.ComposeFile, req.Content, req.Project = version, rel, "compose.yaml", []byte(content), "monky-t"
	raw, _ := json.Marshal(req)
	out, err := serve(raw)
	if err != nil {
		t.Fatal(err)
	}
	var ans Answer
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatal(err)
	}
	return ans
}

// The stage's answer to a PRIVILEGED_REFUSED of fields only the allowlist does not name carries
// its reason (unlisted-field), and one that mixes in a real finding does not: the refusal after
// the lease carries the policy's type as the one before it does.
func TestStageAnswerCarriesTheUnlistedReason(t *testing.T) {
	for _, c := range []struct {
		name, adds string
		reason     vocab.Reason
	}{
		{"only an unlisted field", "    tty: true\n", vocab.ReasonUnlistedField},
		{"an unlisted field and a real finding", "    tty: true\n    privileged: true\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ans := ask(t, Request{Want: WantStage}, "services:\n  api:\n    image: x\n"+c.adds)
			if ans.Code != vocab.PrivilegedRefused || ans.Reason != c.reason {
				t.Errorf("answer %s %q (%s), want PRIVILEGED_REFUSED with reason %q", ans.Code, ans.Reason, ans.Detail, c.reason)
			}
		})
	}
}

// One op answers both wants: the stage gets the resolved model and the services, the release GC
// the images of every profile, in the services' name order; a model that does not load is
// BUNDLE_INVALID for both.
func TestOneOpAnswersEachWant(t *testing.T) {
	const compose = "services:\n  web:\n    image: nginx:1\n  api:\n    image: api:2\n  tool:\n    image: tool:3\n    profiles: [ops]\n"
	st := ask(t, Request{Want: WantStage}, compose)
	if st.Code != "" || len(st.Model) == 0 || len(st.Services) != 2 || st.Services[0].Name != "api" {
		t.Errorf("stage: code %s (%s), %d bytes of model, services %+v", st.Code, st.Detail, len(st.Model), st.Services)
	}
	im := ask(t, Request{Want: WantImages}, compose)
	want := []ServiceImage{{"api", "api:2"}, {"tool", "tool:3"}, {"web", "nginx:1"}}
	if im.Code != "" || len(im.Images) != len(want) {
		t.Fatalf("images: code %s (%s), %+v", im.Code, im.Detail, im.Images)
	}
	for i := range want {
		if im.Images[i] != want[i] {
			t.Errorf("image %d: %+v, want %+v", i, im.Images[i], want[i])
		}
	}
	for _, w := range []string{WantStage, WantImages} {
		if bad := ask(t, Request{Want: w}, "services: [\n"); bad.Code != vocab.BundleInvalid {
			t.Errorf("%s of a model that does not load: %s, want BUNDLE_INVALID", w, bad.Code)
		}
	}
}
