package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/bundle"
)

// TestDemoReleases checks the example backend the demo serves: two releases whose bundles
// carry their sha, two services with a healthcheck on api, a template header that mentions
// ${VAR} literally, and a manifest with one pinned entry whose secrets exist.
func TestDemoReleases(t *testing.T) {
	s := newSim(t, Options{})
	shas, err := s.LoadReleasesDir("env-demo-01", "../../testdata/demo")
	if err != nil {
		t.Fatal(err)
	}
	if len(shas) != 2 || shas["v1"] == "" || shas["v2"] == "" || shas["v1"] == shas["v2"] {
		t.Fatalf("releases = %v", shas)
	}
	for name, sha := range shas {
		_, archive, ok := s.Release("env-demo-01", name)
		if !ok {
			t.Fatalf("%s missing", name)
		}
		files := untar(t, archive)
		if got := bundle.Sha(files); got != sha {
			t.Errorf("%s: sha %s, content %s", name, sha, got)
		}
		compose := string(files["compose.yaml"])
		if !strings.Contains(compose, "image: monky-demo/api:"+name[1:]) || !strings.Contains(compose, "image: monky-demo/worker:"+name[1:]) ||
			!strings.Contains(compose, "healthcheck:") {
			t.Errorf("%s compose.yaml:\n%s", name, compose)
		}
		tpl := string(files[".env.template"])
		lines := strings.Split(tpl, "\n")
		if !strings.HasPrefix(lines[0], "#") || !strings.Contains(lines[0], "${VAR}") {
			t.Errorf("%s: template header does not mention ${VAR}: %q", name, lines[0])
		}
		for _, ref := range []string{"${GEMINI_API_KEY}", "${DB_PASSWORD}"} {
			if !strings.Contains(tpl, ref) {
				t.Errorf("%s: template lacks %s", name, ref)
			}
		}
		var man struct {
			Entries []struct {
				Var, Path, Key string
				Version        int
			}
		}
		if err := json.Unmarshal(files["secrets.manifest.json"], &man); err != nil || len(man.Entries) != 2 {
			t.Fatalf("%s manifest: %v %+v", name, err, man)
		}
		pinned := 0
		for _, e := range man.Entries {
			if e.Version > 0 {
				pinned++
			}
			if !strings.HasPrefix(e.Path, "monky/data/env-demo-01/see/") {
				t.Errorf("%s: manifest path %s outside the env", name, e.Path)
			}
			sec := strings.TrimPrefix(e.Path, "monky/data/env-demo-01/see/")
			s.mu.Lock()
			n := len(s.envLocked("env-demo-01").secrets[sec])
			s.mu.Unlock()
			if n == 0 || e.Version > n {
				t.Errorf("%s: manifest names %s version %d; secrets.json has %d versions", name, sec, e.Version, n)
			}
		}
		if pinned != 1 {
			t.Errorf("%s: %d pinned entries, want 1", name, pinned)
		}
		var meta map[string]any
		_ = json.Unmarshal(files["bundle.json"], &meta)
		if meta["env_id"] != "env-demo-01" || meta["disk_need_bytes"] == nil {
			t.Errorf("%s bundle.json = %v", name, meta)
		}
		if _, ok := files["config/app.toml"]; !ok {
			t.Errorf("%s has no config/app.toml", name)
		}
	}
}
