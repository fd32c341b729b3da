package testkit

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// placeholder is a name a person would have to fill in before a line runs: `<state_dir>`,
// `{config}`.
var placeholder = regexp.MustCompile(`<[a-z_. ]+>|\{[a-z_]+\}`)

// backticked are the commands a prose line quotes.
var backticked = regexp.MustCompile("`([^`]+)`")

// changesBox are the commands that change the box: printed, they run as the agent's user.
var changesBox = []string{"monky-deployd run", "monky-deployd resume", "monky-deployd bootstrap", "docker image prune"}

// RunsAsPrinted fails t when a fix or next line (what names it) holds a placeholder, when bash
// rejects it as a command (whole: a fix line) or a command it quotes in backticks (a next
// line), or when a command in it that changes the box does not run as the agent's user.
func RunsAsPrinted(t testing.TB, what, line string, whole bool) {
	t.Helper()
	if m := placeholder.FindString(line); m != "" {
		t.Errorf("%s holds the placeholder %s: %s", what, m, line)
	}
	cmds := []string{line}
	if !whole {
		cmds = nil
		for _, m := range backticked.FindAllStringSubmatch(line, -1) {
			cmds = append(cmds, m[1])
		}
	}
	for _, c := range cmds {
		if out, err := exec.Command("bash", "-n", "-c", c).CombinedOutput(); err != nil {
			t.Errorf("%s: bash -n rejects %q: %v %s", what, c, err, out)
		}
		for _, changes := range changesBox {
			if i := strings.Index(c, changes); i >= 0 && !strings.HasSuffix(c[:i], "sudo -u monky-deployd ") {
				t.Errorf("%s: %q changes the box but does not run as the agent's user: %s", what, changes, line)
			}
		}
	}
}
