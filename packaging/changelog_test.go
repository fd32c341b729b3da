package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// CHANGELOG.md has one unreleased section, headed by the VERSION the package is built as, and
// names the previous release as a person installs it: the package version test/systemd/PREVIOUS
// gives (1.0.0~<commit>), which sorts below VERSION — so "read from 1.0.0" is never read as
// covering a box that runs 1.0.0~<commit>.
func TestChangelogHasOneUnreleasedSectionAndNamesInstallableVersions(t *testing.T) {
	t.Parallel()
	root := testkit.Root()
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	log, version := read("CHANGELOG.md"), strings.TrimSpace(read("VERSION"))
	var unreleased []string
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, "#") && strings.Contains(strings.ToLower(line), "unreleased") {
			unreleased = append(unreleased, line)
		}
	}
	if len(unreleased) != 1 || unreleased[0] != "## "+version+" — unreleased" {
		t.Errorf("CHANGELOG.md's unreleased headings: %q, want exactly %q", unreleased, "## "+version+" — unreleased")
	}
	var previous string
	for _, line := range strings.Split(read("test/systemd/PREVIOUS"), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(line, "#") {
			previous = f[1]
		}
	}
	if previous == "" {
		t.Fatal("test/systemd/PREVIOUS names no version")
	}
	section := log
	if i := strings.Index(log, "\n## "+version+" — unreleased\n"); i >= 0 {
		section = log[i:]
		if j := strings.Index(section[1:], "\n## "); j >= 0 {
			section = section[:j+1]
		}
	}
	if !strings.Contains(section, "`"+previous+"`") {
		t.Errorf("the unreleased section does not name the previous release as it is installed, `%s`", previous)
	}
	// every "read from X.Y.Z" names a package version: this one or a released one, never a bare
	// version that a 1.0.0~<commit> box would also show
	for _, m := range regexp.MustCompile(`read from ([0-9][0-9A-Za-z.~+-]*[0-9A-Za-z])`).FindAllStringSubmatch(log, -1) {
		if m[1] != version && !strings.Contains(log, "\n## "+m[1]+" ") {
			t.Errorf("CHANGELOG.md says %q: %s is neither this package's version nor a release's heading", m[0], m[1])
		}
	}
	if !regexp.MustCompile(`read from 1\.0\.0: the package ` + "`1.0.0`" + `, not\s+` + "`" + regexp.QuoteMeta(previous) + "`").MatchString(log) {
		t.Errorf("the keys read from 1.0.0 do not say that %s does not read them", previous)
	}
}
