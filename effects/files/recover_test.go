package files

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func wholeLine(b []byte) bool {
	return len(b) > 1 && strings.Count(string(b), "\n") == 1 && b[len(b)-1] == '\n'
}

func TestRecoverTempsFS(t *testing.T) {
	cases := []struct {
		name    string
		temps   map[string]string // suffix → content
		old     string            // the file's content before ("" absent)
		want    string            // the file's content after ("" absent)
		renamed bool
	}{
		{"a whole temp is a write whose rename was lost", map[string]string{"a1": "new\n"}, "old\n", "new\n", true},
		{"the first write of the file", map[string]string{"a1": "new\n"}, "", "new\n", true},
		{"a torn temp is garbage", map[string]string{"a1": "ne"}, "old\n", "old\n", false},
		{"an empty temp is garbage", map[string]string{"a1": ""}, "old\n", "old\n", false},
		{"two whole temps are never guessed between", map[string]string{"a1": "x\n", "b2": "y\n"}, "old\n", "old\n", false},
		{"a whole temp beside a torn one", map[string]string{"a1": "new\n", "b2": "n"}, "old\n", "new\n", true},
		{"nothing left", nil, "old\n", "old\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "bao.token")
			if tc.old != "" {
				os.WriteFile(path, []byte(tc.old), 0o600)
			}
			for sfx, data := range tc.temps {
				os.WriteFile(filepath.Join(dir, TempPrefix(path)+sfx), []byte(data), 0o600)
			}
			os.WriteFile(filepath.Join(dir, ".lease.grant.tmp-zz"), []byte("other\n"), 0o600) // another file's: untouched
			got, err := RecoverTempsFS(OS, path, wholeLine)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.renamed {
				t.Errorf("recovered %v, want %v", got, tc.renamed)
			}
			b, _ := os.ReadFile(path)
			if string(b) != tc.want {
				t.Errorf("bao.token %q, want %q", b, tc.want)
			}
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if left := strings.Join(names, " "); strings.Contains(left, ".bao.token.tmp-") || !strings.Contains(left, ".lease.grant.tmp-zz") {
				t.Errorf("left in the directory: %s", left)
			}
		})
	}
	if ok, err := RecoverTempsFS(OS, filepath.Join(t.TempDir(), "missing", "bao.token"), wholeLine); ok || err != nil {
		t.Errorf("a missing directory: %v %v", ok, err)
	}
}
