package bench

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// modules lists the third-party modules a main package links: every module of its dependencies
// that is neither the standard library nor this project.
func modules(t *testing.T, tags, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-tags", tags, "-f", "{{with .Module}}{{.Path}}{{end}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	var mods []string
	for _, m := range strings.Fields(string(out)) {
		if m != "github.com/tikali/monky-deployd" && !slices.Contains(mods, m) {
			mods = append(mods, m)
		}
	}
	slices.Sort(mods)
	return mods
}

// The design floor (test/bench/floor -tags design) links every third-party module the agent
// links as the package ships it, so that `make bench`'s "agent / design floor" is the price of
// the agent's own code and "design floor / floor" the price of the libraries.
func TestDesignFloorLinksTheAgentsLibraries(t *testing.T) {
	agent := modules(t, "urfave_cli_no_docs", "../../cmd/monky-deployd")
	floor := modules(t, "design", "../../test/bench/floor")
	var missing []string
	for _, m := range agent {
		if !slices.Contains(floor, m) {
			missing = append(missing, m)
		}
	}
	if len(agent) == 0 || len(missing) > 0 {
		t.Fatalf("the design floor does not link %v of the agent's %d modules; link them in test/bench/floor/design.go", missing, len(agent))
	}
}
