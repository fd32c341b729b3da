package states_test

import (
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/redact"
)

// A heartbeat that finds a service unhealthy sends compose's log tail. In a new process (a new
// tick of the timer) the values in current/.env and the registry password were never read from
// OpenBao: they used to go to tenancy in clear. They are registered at the tick's start now.
func TestHeartbeatFailedReportMasksTheBoxSecrets(t *testing.T) {
	h := newHarness(t)
	h.sim.PutSecret(env, "registry", map[string]string{"value": `{"registry":"harbor.example","username":"robot","password":"canary-registry-pw-Hh4"}`})
	h.release("v1", func(files map[string][]byte) {
		files["secrets.manifest.json"] = []byte(`{"entries": [
  {"var": "GEMINI_API_KEY", "path": "monky/data/env-qa-02/see/gemini", "key": "value", "version": 1},
  {"var": "DB_PASSWORD", "path": "monky/data/env-qa-02/see/db", "key": "password"},
  {"use": "registry-auth", "path": "monky/data/env-qa-02/see/registry"}
]}`)
	})
	h.wantExit(h.tick(), 0)
	h.wantExit(h.tick(), 0) // a heartbeat

	// a new process: the redactor knows nothing of this box
	old := redact.Default
	redact.Default = redact.New()
	t.Cleanup(func() { redact.Default = old })
	secrets := []string{"canary-gemini-v1-Qx7", "canary-db-pw-Kw3", "canary-registry-pw-Hh4"}
	h.dockerKnob("unhealthy", "api\n")
	h.dockerKnob("log-line", "booting with key="+secrets[0]+" db="+secrets[1]+" pull as robot:"+secrets[2])

	h.wantExit(h.tick(), 1)
	reps := h.sim.Reports(env)
	last := reps[len(reps)-1]
	if last.Result != "failed" || !strings.Contains(last.LogTail, "booting with key=") {
		t.Fatalf("last report %s, log tail %q", last.Result, last.LogTail)
	}
	for _, s := range secrets {
		if strings.Contains(last.LogTail, s) || strings.Contains(last.Detail, s) {
			t.Errorf("the failed report carries %s in clear: %q", s, last.LogTail)
		}
	}
}
