package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/testkit"
)

// TestRunMasksWhatItPrints: run is the sink of what a command prints. A registered value that a
// command's words carry (here a key of the config, on stdout) and one that the closing line
// carries (a path, on stderr) leave masked, though no command masks anything itself; the
// words around them stay.
func TestRunMasksWhatItPrints(t *testing.T) {
	const canary = "Zq8sinkcanaryWx"
	redact.Add(canary)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	testkit.WriteFile(t, cfg, "env_id: env-qa-02\nsite: cbs\nstate_dir: "+filepath.Join(dir, "state")+"\n"+canary+": 1\n", 0o600)

	o, e, c := runIn("check", "config", cfg)
	if c != 1 || strings.Contains(o+e, canary) || !strings.Contains(o, `unknown key "`+redact.Mask+`"`) {
		t.Errorf("check config: exit %d, stdout %q, stderr %q: want exit 1 and the key masked", c, o, e)
	}
	o, e, c = runIn("--config", filepath.Join(dir, canary, "config.yaml"), "status")
	if c == 0 || strings.Contains(o+e, canary) || !strings.Contains(e, redact.Mask) {
		t.Errorf("status: exit %d, stdout %q, stderr %q: want a failure naming the path masked", c, o, e)
	}
}
