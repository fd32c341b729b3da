package model

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// loadRelease loads compose.yaml of a real directory as the run-time half does: with the
// values at hand, paths resolved.
func loadRelease(t *testing.T, dir, compose string) *types.Project {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(compose), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, "compose.yaml")}},
		Environment: types.Mapping{"DATA": "/srv/data"},
	}, func(o *loader.Options) { o.SetProjectName("monky-env-qa-02", true) })
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// CheckModel runs the same policy on a model loaded with real values (no placeholders): a
// bind whose source a variable decides is judged by the value it has.
func TestCheckModelRealValues(t *testing.T) {
	dir := t.TempDir()
	p := loadRelease(t, dir, `services:
  api:
    image: x
    volumes: ["${DATA}:/data", "./conf:/conf:ro"]
    cap_add: [NET_BIND_SERVICE, SYS_TIME]
    tty: true
`)
	got := findingStrings(CheckModel(p, dir, false))
	var fields []string
	for _, f := range CheckModel(p, dir, false) {
		fields = append(fields, f.Who+"|"+f.Field)
	}
	if strings.Join(fields, ",") != "service api|cap_add,service api|volumes,service api|tty" {
		t.Errorf("who|field = %v (findings %q)", fields, got)
	}
	for _, w := range []string{"service api: cap_add SYS_TIME", "service api: bind /srv/data → /data", "service api: tty is not allowed"} {
		if !strings.Contains(strings.Join(got, "\n"), w) {
			t.Errorf("findings %q lack %q", got, w)
		}
	}
	if f := CheckModel(p, dir, true); f != nil {
		t.Errorf("allow_privileged: findings %v, want none", f)
	}
	clean := loadRelease(t, dir, "services:\n  api:\n    image: x\n    volumes: [\"./conf:/conf:ro\", \"data:/data\"]\nvolumes:\n  data: {}\n")
	if f := CheckModel(clean, dir, false); f != nil {
		t.Errorf("clean model: findings %v", f)
	}
}

// The allowlist sets are well formed: sorted (contains searches them), no duplicates.
func TestAllowlistsSorted(t *testing.T) {
	for name, l := range map[string][]string{"serviceAllowed": serviceAllowed, "topAllowed": topAllowed,
		"networkAllowed": networkAllowed, "volumeAllowed": volumeAllowed, "defaultCaps": defaultCaps, "logDrivers": logDrivers} {
		for i := 1; i < len(l); i++ {
			if l[i-1] >= l[i] {
				t.Errorf("%s: %q before %q", name, l[i-1], l[i])
			}
		}
	}
}

// docs/SECURITY.md's allowlist table lists exactly the code's lists.
func TestSecurityDocListsTheAllowlist(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "SECURITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	tick := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(string(raw), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		var names []string
		for _, m := range tick.FindAllStringSubmatch(cells[2], -1) {
			names = append(names, m[1])
		}
		rows[strings.TrimSpace(cells[1])] = names
	}
	for row, list := range map[string][]string{
		"service fields": serviceAllowed, "top-level keys": topAllowed, "network fields": networkAllowed,
		"volume fields": volumeAllowed, "`cap_add` capabilities": defaultCaps, "`logging` drivers": logDrivers,
	} {
		if got, ok := rows[row]; !ok || strings.Join(got, " ") != strings.Join(list, " ") {
			t.Errorf("SECURITY.md row %q lists %q, the code %q", row, got, list)
		}
	}
}
