package testkit

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/shline"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// placeholder is a name a person would have to fill in before a line runs: `<state_dir>`,
// `{config}`.
var placeholder = regexp.MustCompile(`<[a-z_. ]+>|\{[a-z_]+\}`)

// backticked are the commands a prose line quotes.
var backticked = regexp.MustCompile("`([^`]+)`")

// changesBox are the commands that change the box: printed, they run as the agent's user.
var changesBox = []string{"monky-deployd run", "monky-deployd resume", "monky-deployd bootstrap", "docker image prune"}

// commentCommand is a command a person would copy out of a fix line's comment: a follow-up
// belongs in the code (`&& …`), where bash checks it, not in the `# …` words.
var commentCommand = regexp.MustCompile(`(^|[^-\w/.])(sudo |systemctl \w+ \S|journalctl |usermod |apt-get |rm |docker image prune|monky-deployd (--config (?:'[^']*'|\S+) )?(run|resume|status|explain|bootstrap|check|purge|hold)\b)`)

// asAgentsUser ends a command's prefix that runs it as the agent's user (sudo -u NAME, or a uid).
var asAgentsUser = regexp.MustCompile(`sudo -u (?:'#\d+'|[a-z_][-a-z0-9_]*) $`)

// lacking are tools a box may lack: no printed line may need one.
var lacking = regexp.MustCompile(`(^|[^-\w/.])jq\b`)

// RunsAsPrinted fails t when a fix or next line (what names it) holds a placeholder, when bash
// rejects it as a command (whole: a fix line) or a command it quotes in backticks (a next
// line), when a command in it that changes the box does not run as the agent's user, or when it
// needs a tool the box may lack (jq). A fix line is a command, not only a comment, with no
// command inside its comment — or, for a cause no command addresses, words that say so
// (vocab.NoCommand).
func RunsAsPrinted(t testing.TB, what, line string, whole bool) {
	t.Helper()
	if m := placeholder.FindString(line); m != "" {
		t.Errorf("%s holds the placeholder %s: %s", what, m, line)
	}
	if lacking.MatchString(line) {
		t.Errorf("%s needs jq, which the box may lack: %s", what, line)
	}
	cmds := []string{line}
	if whole && strings.HasPrefix(line, vocab.NoCommand) {
		cmds = nil // words: no command addresses the cause
	} else if whole {
		code, comment := shline.Split(line)
		if strings.TrimSpace(code) == "" {
			t.Errorf("%s is only a comment (say %q and the words instead): %s", what, vocab.NoCommand, line)
		}
		if m := commentCommand.FindString(comment); m != "" {
			t.Errorf("%s holds a command inside its comment (%q): join it to the code: %s", what, strings.TrimSpace(m), line)
		}
	} else {
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
			if i := strings.Index(c, changes); i >= 0 && !asAgentsUser.MatchString(c[:i]) {
				t.Errorf("%s: %q changes the box but does not run as the agent's user: %s", what, changes, line)
			}
		}
	}
}
