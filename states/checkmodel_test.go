package states

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tikali/monky-deployd/internal/vocab"
)

// The stage's child answers a PRIVILEGED_REFUSED of fields only the allowlist does not name
// with its reason (unlisted-field), and one that mixes in a real finding without it: the
// refusal after the lease carries the policy's type as the one before it does.
func TestStageAnswerCarriesTheUnlistedReason(t *testing.T) {
	for _, c := range []struct {
		name, adds string
		reason     vocab.Reason
	}{
		{"only an unlisted field", "    tty: true\n", vocab.ReasonUnlistedField},
		{"an unlisted field and a real finding", "    tty: true\n    privileged: true\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rel := t.TempDir()
			content := []byte("services:\n  api:\n    image: x\n" + c.adds)
			if err := os.WriteFile(filepath.Join(rel, "compose.yaml"), content, 0o644); err != nil {
				t.Fatal(err)
			}
			req, _ := json.Marshal(stageRequest{V: stageVersion, Rel: rel, ComposeFile: "compose.yaml", Content: content, Project: "monky-t"})
			raw, err := serveStage(req)
			if err != nil {
				t.Fatal(err)
			}
			var ans stageAnswer
			if err := json.Unmarshal(raw, &ans); err != nil {
				t.Fatal(err)
			}
			if ans.Code != vocab.PrivilegedRefused || ans.Reason != c.reason {
				t.Errorf("answer %s %q (%s), want PRIVILEGED_REFUSED with reason %q", ans.Code, ans.Reason, ans.Detail, c.reason)
			}
		})
	}
}
