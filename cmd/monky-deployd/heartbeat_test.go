package main

import (
	"os"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// heartbeatBin builds the heartbeat build beside the complete agent in testkit.BinDir, as the
// package installs it (there with -X main.completeAgent; here the sibling default).
func heartbeatBin(t *testing.T) string {
	t.Helper()
	const name = "monky-deployd-heartbeat"
	if _, err := testkit.Build(name, "./cmd/monky-deployd", "-tags", "urfave_cli_no_docs,heartbeat",
		"-ldflags", "-X github.com/tikali/monky-deployd/internal/version.Version="+wantVersion); err != nil {
		t.Fatalf("build the heartbeat build: %v", err)
	}
	return name
}

// The heartbeat build runs a converged box's tick alone and execs the complete agent for the
// rest, passing the lock and its check-in: every tick below checks in once.
func TestHeartbeatBuild(t *testing.T) {
	hb := heartbeatBin(t)
	b := startBox(t)
	beat := func(want int) string {
		t.Helper()
		r := b.Run(hb, nil, "--config", b.Config(), "run", "--once")
		e := r.Stderr
		if r.Code != want {
			t.Fatalf("heartbeat build: run --once exit %d, want %d; stderr:\n%s", r.Code, want, e)
		}
		if strings.Contains(e, "handover") || strings.Contains(e, "tick lock") {
			t.Fatalf("the handover did not arrive whole:\n%s", e)
		}
		return e
	}
	wantCheckins := func(n int) {
		t.Helper()
		if c := b.Counts(); c.Checkins != n {
			t.Fatalf("%d check-ins, want %d", c.Checkins, n)
		}
	}

	// a new box: handed over before the check-in; the complete agent applies v1
	b.Sim("desire", "--release", "v1")
	if e := beat(0); !strings.Contains(e, "applied") {
		t.Fatalf("the first tick did not apply:\n%s", e)
	}
	wantCheckins(1)
	ups := b.DockerCalls("compose", "up")

	// converged: the heartbeat build's own tick
	if e := beat(0); !strings.Contains(e, "heartbeat: ") {
		t.Fatalf("no heartbeat line:\n%s", e)
	}
	wantCheckins(2)

	// tenancy asks for v2: the complete agent applies it on the heartbeat build's check-in
	b.Sim("desire", "--release", "v2")
	if e := beat(0); !strings.Contains(e, "applied") {
		t.Fatalf("v2 was not applied:\n%s", e)
	}
	wantCheckins(3)
	if n := b.DockerCalls("compose", "up"); n != ups+1 {
		t.Fatalf("%d compose up calls after the second apply, want %d", n, ups+1)
	}
	if d := b.explainJSON(); d.State != "Reported" || len(d.Ticks) == 0 || d.Ticks[0].Action != "apply" || d.Ticks[0].Exit != 0 {
		t.Fatalf("explain after the handed-over apply: %+v", d)
	}

	// the commands it runs itself or hands over answer as the complete agent's, word for word
	readOnly := [][]string{{"explain", "-n", "3"}, {"status"}, {"version", "--json"}}
	for _, args := range append(readOnly, []string{"resume", "--dry-run"}) {
		full := append([]string{"--config", b.Config()}, args...)
		r1 := b.Run("monky-deployd", nil, full...)
		r2 := b.Run(hb, nil, full...)
		if r1.Stdout != r2.Stdout || r1.Stderr != r2.Stderr || r1.Code != r2.Code {
			t.Fatalf("%v: the heartbeat build answered differently:\n%d %s%s\n---\n%d %s%s", args, r1.Code, r1.Stdout, r1.Stderr, r2.Code, r2.Stdout, r2.Stderr)
		}
	}

	// no complete agent: the tick fails naming it, and the next one (with it back) retires
	complete := testkit.Bin("monky-deployd")
	aside := complete + ".aside"
	if err := os.Rename(complete, aside); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := os.Rename(aside, complete); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	// status, explain and version are its own: they answer without the complete agent
	for _, args := range readOnly {
		if r := b.Run(hb, nil, append([]string{"--config", b.Config()}, args...)...); r.Code != 0 || r.Stdout == "" {
			t.Fatalf("%v without the complete agent: exit %d\n%s%s", args, r.Code, r.Stdout, r.Stderr)
		}
	}
	if r := b.Run(hb, nil, "--config", b.Config(), "resume", "--dry-run"); r.Code != 1 || !strings.Contains(r.Stderr, complete) {
		t.Fatalf("resume without the complete agent: exit %d, stderr %q", r.Code, r.Stderr)
	}
	b.Sim("retire")
	if e := beat(1); !strings.Contains(e, complete) || !strings.Contains(e, "complete agent") {
		t.Fatalf("a missing complete agent is not named:\n%s", e)
	}
	wantCheckins(4)
	restore()
	beat(0)
	if n := b.DockerCalls("compose", "down"); n != 1 {
		t.Fatalf("%d compose down calls once the complete agent was back, want 1", n)
	}
	wantCheckins(5)
}

// A heartbeat build reached as the complete agent refuses instead of looping or idling.
func TestHeartbeatBuildHandedBack(t *testing.T) {
	hb := heartbeatBin(t)
	b := startBox(t)
	r := b.Run(hb, []string{envHandover + "=-"}, "--config", b.Config(), "run", "--once")
	if r.Code != 1 || !strings.Contains(r.Stderr, "heartbeat build, reached as the complete agent") {
		t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
	}
	if n := b.Counts().Checkins; n != 0 {
		t.Fatalf("%d check-ins", n)
	}
}
