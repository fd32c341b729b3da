package states_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/shline"
	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine/explain"
)

// follow does what a desk does with a fix or next line on box h: it runs the line's commands
// that only look (ls, grep, df — as printed, less the sudo a test has no user for) and returns
// what they print; it maps the agent's own commands to the box (`monky-deployd resume` to a
// resume, `monky-deployd run --once` to a tick), and fails on a command it does not know.
// What a person changes by hand (the comment after `#`) is the case's own step.
func (h *harness) follow(line string) (looked string) {
	h.t.Helper()
	cmd, comment := shline.Split(line)
	if words, ok := strings.CutPrefix(line, vocab.NoCommand); ok {
		cmd, comment = "", words // a cause no command on the box addresses: words only
	}
	cmd, comment = h.ownConfig(cmd), h.ownConfig(comment)
	var out strings.Builder
	for _, seg := range shline.Commands(cmd) {
		c := strings.TrimSpace(strings.TrimPrefix(shline.Start(seg.Text), "then:"))
		c = strings.TrimPrefix(c, "sudo -u monky-deployd ")
		c = strings.TrimPrefix(c, "sudo ")
		switch f := strings.Fields(c); {
		case len(f) == 0:
		case f[0] == "ls" || f[0] == "grep" || f[0] == "df":
			b, _ := exec.Command("bash", "-c", c).CombinedOutput() // a look: its exit says nothing
			out.Write(b)
		case f[0] == "rm" || f[0] == "chmod":
			// a mend: it must do what it says, as printed
			if b, err := exec.Command("bash", "-c", c).CombinedOutput(); err != nil {
				h.t.Fatalf("the line's %q fails: %v %s\nline: %s", c, err, b, line)
			}
		case f[0] == "monky-deployd" && len(f) > 1 && (f[1] == "status" || f[1] == "explain"):
		case f[0] == "monky-deployd" && len(f) > 1 && (f[1] == "resume" || f[1] == "run"):
			// the agent's own: run below, in the order the line names them
		case f[0] == "systemctl" || f[0] == "docker" || f[0] == "bao" || f[0] == "curl":
			// the box's services and OpenBao: not on a test box; a look only
		default:
			h.t.Fatalf("the line runs %q, which this desk does not know: %s", c, line)
		}
	}
	// the agent's commands the line (or its comment) says to run next
	for _, c := range agentCommands(cmd + " " + comment) {
		switch c {
		case "monky-deployd resume":
			if _, err := h.agent().Resume(false); err != nil {
				h.t.Fatal(err)
			}
		case "monky-deployd run --once":
			h.tick()
		}
	}
	return out.String()
}

// ownConfig is line with every `monky-deployd --config PATH` read as the agent typed on this
// box: PATH must be this box's config (the harness' is never the packaged default), and an agent
// command without it would read another box's.
func (h *harness) ownConfig(line string) string {
	h.t.Helper()
	for _, m := range agentRun.FindAllStringSubmatch(line, -1) {
		if m[1] != h.cfg.Path {
			h.t.Fatalf("the line's %q reads config %q, this box's is %q: %s", m[2], m[1], h.cfg.Path, line)
		}
	}
	return agentRun.ReplaceAllString(line, "monky-deployd $2")
}

// agentRun is the agent's own command in a line, with the config it names (none: the default).
var agentRun = regexp.MustCompile(`monky-deployd (?:--config (\S+) )?(run|resume|status|explain|bootstrap)\b`)

// quoted are the commands a prose line quotes in backticks.
var quoted = regexp.MustCompile("`([^`]+)`")

// agentCommands are the agent's commands that change the box, in the order line names them.
func agentCommands(line string) []string {
	line = agentRun.ReplaceAllString(line, "monky-deployd $2")
	var out []string
	for _, w := range strings.Split(line, "sudo -u monky-deployd ")[1:] {
		for _, c := range []string{"monky-deployd resume", "monky-deployd run --once"} {

			if strings.HasPrefix(w, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// fixCase is a trouble, what a person does by hand where the fix line's comment says so
// (given what the line's looks printed), and the next tick's exit that says it cleared.
type fixCase struct {
	name string
	// hand is the person's step after the line's looks; wants are what the fix line must say
	// for that step to be the line's own.
	hand  func(h *harness, looked string)
	wants []string
	exit  int
	// resume: the next line's `monky-deployd resume` is what lifts it after the hand's step
	resume bool
}

// TestFixLinesClearTheBox: for twelve of the commonest troubles, a desk follows the fix line (and
// the next line's command) explain prints on the box's copy, literally, and the next tick
// clears it: exit 0 and converged.
func TestFixLinesClearTheBox(t *testing.T) {
	testkit.Heavy(t, "make test-heavy", "twelve boxes")
	cases := []fixCase{
		{name: "blocked-unauthenticated", wants: []string{"re-run the install kit"}, hand: func(h *harness, looked string) {
			if !strings.Contains(looked, "No such file") {
				h.t.Errorf("the look did not show the grant absent: %s", looked)
			}
			h.freshGrant() // the install kit, run again
		}},
		{name: "blocked-with-outbox", wants: []string{"re-run the install kit"}, hand: func(h *harness, _ string) {
			h.sim.ClearFails()
			h.freshGrant()
		}},
		{name: "blocked-env-mismatch", wants: []string{"fix env_id"}, hand: func(h *harness, looked string) {
			if !strings.Contains(looked, "env-qa-03") {
				h.t.Errorf("the look did not show the config's env_id: %s", looked)
			}
			h.rewriteConfig(`env_id: "env-qa-03"`, `env_id: "env-qa-02"`)
		}},
		{name: "refused-disk-headroom", wants: []string{"disk.headroom_bytes", "lower it"}, hand: func(h *harness, _ string) {
			h.rewriteConfig("state_dir:", "disk:\n  headroom_bytes: 268435456\nstate_dir:")
		}},
		{name: "refused-disk-full", wants: []string{"grow the disk or free space"}, hand: func(h *harness, _ string) {
			h.disk.free = 500 << 30
		}},
		// the fix line removes what the trust check refused itself: the person does nothing more
		{name: "lock-file-unusable", wants: []string{"sudo rm -r -- " + "{lock}", "removes the directory", "run --once"}, hand: func(h *harness, _ string) {
			if fi, err := os.Lstat(h.cfg.LockPath()); err == nil && fi.IsDir() {
				h.t.Errorf("the fix line left the lock directory")
			}
		}},
		{name: "token-symlink", wants: []string{"sudo -u monky-deployd rm -- {token}", "removes the link", "re-run the install kit first"}, hand: func(h *harness, _ string) {
			if _, err := os.Lstat(h.cfg.TokenPath()); err == nil {
				h.t.Errorf("the fix line left the symlink")
			}
			h.freshGrant() // the install kit, run again, as the line says
		}},
		{name: "token-file-writable", wants: []string{"sudo -u monky-deployd chmod go-rwx {token}", "makes it the agent's user's alone"}, hand: func(h *harness, _ string) {
			if fi, err := os.Stat(h.cfg.TokenPath()); err != nil || fi.Mode().Perm() != 0o600 {
				h.t.Errorf("the fix line left the token's mode: %v %v", fi.Mode(), err)
			}
		}},
		{name: "token-file-unusable", wants: []string{"sudo rm -r -- {token}", "re-run the install kit first"}, hand: func(h *harness, _ string) {
			h.freshGrant()
		}},
		{name: "failed-parked", wants: []string{"logs --tail 50", "`sudo -u monky-deployd monky-deployd resume`"}, resume: true, hand: func(h *harness, _ string) {
			h.dockerKnob("up-error", "") // the port freed
		}},
		{name: "unhealthy-heartbeat", wants: []string{"ps"}, hand: func(h *harness, _ string) {
			h.dockerKnob("unhealthy", "") // the service mended
		}},
		{name: "refused-rollback", wants: []string{"set agent.allow_rollback: true in that bundle, or desire a new sha"}, hand: func(h *harness, _ string) {
			h.release("v3", nil) // a new sha, published
		}},
	}
	all := map[string]supportCase{}
	for _, c := range supportCases(t) {
		all[c.name] = c
	}
	for _, fc := range cases {
		t.Run(fc.name, func(t *testing.T) {
			c, ok := all[fc.name]
			if !ok {
				t.Fatalf("no support case %s", fc.name)
			}
			var h *harness
			if c.sim != nil {
				h = newHarness(t, c.sim)
			} else {
				h = newHarness(t)
			}
			c.run(h)
			doc, err := explain.Build(h.st, explain.Options{Copy: true, Now: h.clock.Now()})
			if err != nil || doc.Why == nil {
				t.Fatalf("explain: %v %+v", err, doc.Why)
			}
			fix, next := doc.Why.Fix, doc.Why.Next
			for _, w := range fc.wants {
				w = strings.NewReplacer("{lock}", h.cfg.LockPath(), "{token}", h.cfg.TokenPath()).Replace(w)
				if !strings.Contains(h.ownConfig(fix+" "+next), w) {
					t.Fatalf("the fix line does not say %q: %s\nnext: %s", w, fix, next)
				}
			}
			looked := h.follow(fix)
			fc.hand(h, looked)
			// the agent's commands the next line quotes, as a desk runs them
			for _, m := range quoted.FindAllStringSubmatch(next, -1) {
				if fc.resume && strings.HasPrefix(h.ownConfig(m[1]), "sudo -u monky-deployd monky-deployd resume") {
					h.follow(m[1])
				}
			}
			h.clock.Advance(time.Minute)
			h.wantExit(h.tick(), fc.exit)
			after, err := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
			if err != nil || after.Verdict != explain.Converged {
				t.Errorf("after following the fix line: verdict %s codes %v (%v)\nfix: %s\nnext: %s", after.Verdict, after.Codes, err, fix, next)
			}
		})
	}
}
