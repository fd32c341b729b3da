package main

import (
	"os"
	"os/user"
	"regexp"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/sanitize"
)

// documentedLogLines are the lines docs/OPERATIONS.md quotes between its log-lines markers,
// as patterns: `…` stands for anything; the env, tick numbers, durations and shas vary.
func documentedLogLines(t *testing.T) []*regexp.Regexp {
	t.Helper()
	raw, err := os.ReadFile("../../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "<!-- log-lines:begin -->")
	block, _, ok2 := strings.Cut(rest, "<!-- log-lines:end -->")
	if !ok || !ok2 {
		t.Fatal("docs/OPERATIONS.md has no log-lines block")
	}
	var out []*regexp.Regexp
	// the docs quote a packaged box, whose agent runs as monky-deployd; this one runs as the
	// test's user, and its lines name that user
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	vary := regexp.MustCompile(`env_id=env-qa-02|tick=[0-9]+|ms=[0-9]+|\b[0-9a-f]{12}\b|…|sudo -u monky-deployd `)
	for _, l := range strings.Split(block, "\n") {
		if !strings.HasPrefix(l, "<") {
			continue
		}
		var p strings.Builder
		last := 0
		for _, m := range vary.FindAllStringIndex(l, -1) {
			p.WriteString(regexp.QuoteMeta(l[last:m[0]]))
			switch v := l[m[0]:m[1]]; {
			case v == "…":
				p.WriteString(".*")
			case v == "sudo -u monky-deployd ":
				p.WriteString(regexp.QuoteMeta("sudo -u " + sanitize.ShellWord(me.Username) + " "))
			case strings.HasPrefix(v, "env_id="):
				p.WriteString("env_id=" + demoEnv)
			case strings.HasPrefix(v, "tick="), strings.HasPrefix(v, "ms="):
				p.WriteString(v[:strings.Index(v, "=")+1] + "[0-9]+")
			default:
				p.WriteString("[0-9a-f]{12}")
			}
			last = m[1]
		}
		p.WriteString(regexp.QuoteMeta(l[last:]))
		out = append(out, regexp.MustCompile("^"+p.String()+"$"))
	}
	if len(out) < 10 {
		t.Fatalf("only %d documented lines", len(out))
	}
	return out
}

// TestDocumentedLogLines runs the agent as systemd runs it (stderr a journal stream) through
// an apply, a heartbeat, a privileged bundle, an unhealthy service, tenancy down, a report not
// acknowledged and a refused bearer, and finds every line docs/OPERATIONS.md quotes. Every line
// carries its priority, env_id and tick, and no empty field; a heartbeat is one line.
func TestDocumentedLogLines(t *testing.T) {
	b := startBox(t, "--releases", releasesWithPrivileged(t))
	var all []string
	step := func(name string, want int, args ...string) []string {
		t.Helper()
		c, lines := b.journal(args...)
		if c != want {
			t.Errorf("%s: exit %d, want %d:\n%s", name, c, want, strings.Join(lines, "\n"))
		}
		all = append(all, lines...)
		return lines
	}
	b.Desire("v1")
	step("apply", 0, "run", "--once")
	if hb := step("heartbeat", 0, "run", "--once"); len(hb) != 1 {
		t.Errorf("a heartbeat wrote %d lines, want 1:\n%s", len(hb), strings.Join(hb, "\n"))
	}
	b.Desire("v3")
	step("privileged", 1, "run", "--once")
	step("still refused", 1, "run", "--once")
	b.Desire("v2")
	step("apply v2", 0, "run", "--once")
	b.DockerKnob("unhealthy", "api\n")
	step("unhealthy", 1, "run", "--once")
	b.DockerKnob("unhealthy", "")
	b.fail(`{"path": "/v1/agent/checkin", "status": 503}`)
	step("tenancy down", 75, "run", "--once")
	b.clearFails()
	b.fail(`{"path": "/v1/agent/report", "status": 503}`)
	step("report not acknowledged", 75, "run", "--once")
	b.clearFails()
	step("outbox drained", 0, "run", "--once")
	b.Sim("reveal", "--kit", b.Dir+"/other-kit")
	step("bearer refused", 1, "run", "--once")
	step("blocked", 1, "run", "--once")
	step("usage error", 1, "nosuch")

	for _, re := range documentedLogLines(t) {
		found := false
		for _, l := range all {
			if re.MatchString(l) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("documented line not in the output: %s", re)
		}
	}
	prio := regexp.MustCompile(`^<[0-7]>`)
	for _, l := range all {
		if !prio.MatchString(l) {
			t.Errorf("line without a priority: %q", l)
		}
		if strings.Contains(l, `=""`) {
			t.Errorf("line with an empty field: %q", l)
		}
		if strings.HasPrefix(l, "<3>monky-deployd: ") {
			continue // a usage error: no config, no tick
		}
		if !strings.Contains(l, " env_id="+demoEnv) || !regexp.MustCompile(` tick=[0-9]+`).MatchString(l) {
			t.Errorf("line without env_id and tick: %q", l)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", strings.Join(all, "\n"))
	}
}
