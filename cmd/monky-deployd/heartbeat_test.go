package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	heartbeatOnce sync.Once
	heartbeatErr  error
)

// heartbeatBin builds the heartbeat build beside the complete agent in binDir, as the package
// installs it (there with -X main.completeAgent; here the sibling default).
func heartbeatBin(t *testing.T) string {
	t.Helper()
	heartbeatOnce.Do(func() {
		cmd := exec.Command("go", "build", "-tags", "urfave_cli_no_docs,heartbeat",
			"-ldflags", "-X github.com/tikali/monky-deployd/internal/version.Version="+wantVersion,
			"-o", filepath.Join(binDir, "monky-deployd-heartbeat"), ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			heartbeatErr = err
			t.Logf("%s", out)
		}
	})
	if heartbeatErr != nil {
		t.Fatalf("build the heartbeat build: %v", heartbeatErr)
	}
	return "monky-deployd-heartbeat"
}

// The heartbeat build runs a converged box's tick alone and execs the complete agent for the
// rest, passing the lock and its check-in: every tick below checks in once.
func TestHeartbeatBuild(t *testing.T) {
	hb := heartbeatBin(t)
	b := startBox(t)
	beat := func(want int) string {
		t.Helper()
		_, e, c, _ := b.runBin(hb, nil, "--config", b.config(), "run", "--once")
		if c != want {
			t.Fatalf("heartbeat build: run --once exit %d, want %d; stderr:\n%s", c, want, e)
		}
		if strings.Contains(e, "handover") || strings.Contains(e, "tick lock") {
			t.Fatalf("the handover did not arrive whole:\n%s", e)
		}
		return e
	}
	wantCheckins := func(n int) {
		t.Helper()
		if c := b.counts(); c.Checkins != n {
			t.Fatalf("%d check-ins, want %d", c.Checkins, n)
		}
	}

	// a new box: handed over before the check-in; the complete agent applies v1
	b.sim("desire", "--release", "v1")
	if e := beat(0); !strings.Contains(e, "applied") {
		t.Fatalf("the first tick did not apply:\n%s", e)
	}
	wantCheckins(1)
	ups := b.dockerCalls("compose", "up")

	// converged: the heartbeat build's own tick
	if e := beat(0); !strings.Contains(e, "heartbeat: ") {
		t.Fatalf("no heartbeat line:\n%s", e)
	}
	wantCheckins(2)

	// tenancy asks for v2: the complete agent applies it on the heartbeat build's check-in
	b.sim("desire", "--release", "v2")
	if e := beat(0); !strings.Contains(e, "applied") {
		t.Fatalf("v2 was not applied:\n%s", e)
	}
	wantCheckins(3)
	if n := b.dockerCalls("compose", "up"); n != ups+1 {
		t.Fatalf("%d compose up calls after the second apply, want %d", n, ups+1)
	}
	if d := b.explainJSON(); d.State != "Reported" || len(d.Ticks) == 0 || d.Ticks[0].Action != "apply" || d.Ticks[0].Exit != 0 {
		t.Fatalf("explain after the handed-over apply: %+v", d)
	}

	// every other command is the complete agent's, word for word
	for _, args := range [][]string{{"explain", "-n", "3"}, {"status"}, {"version", "--json"}} {
		full := append([]string{"--config", b.config()}, args...)
		o1, e1, c1, _ := b.runBin("monky-deployd", nil, full...)
		o2, e2, c2, _ := b.runBin(hb, nil, full...)
		if o1 != o2 || e1 != e2 || c1 != c2 {
			t.Fatalf("%v: the heartbeat build answered differently:\n%d %s%s\n---\n%d %s%s", args, c1, o1, e1, c2, o2, e2)
		}
	}

	// no complete agent: the tick fails naming it, and the next one (with it back) retires
	complete := filepath.Join(binDir, "monky-deployd")
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
	b.sim("retire")
	if e := beat(1); !strings.Contains(e, complete) || !strings.Contains(e, "complete agent") {
		t.Fatalf("a missing complete agent is not named:\n%s", e)
	}
	wantCheckins(4)
	restore()
	beat(0)
	if n := b.dockerCalls("compose", "down"); n != 1 {
		t.Fatalf("%d compose down calls once the complete agent was back, want 1", n)
	}
	wantCheckins(5)
}

// A heartbeat build reached as the complete agent refuses instead of looping or idling.
func TestHeartbeatBuildHandedBack(t *testing.T) {
	hb := heartbeatBin(t)
	b := startBox(t)
	_, e, c, _ := b.runBin(hb, []string{envHandover + "=-"}, "--config", b.config(), "run", "--once")
	if c != 1 || !strings.Contains(e, "heartbeat build, reached as the complete agent") {
		t.Fatalf("exit %d:\n%s", c, e)
	}
	if n := b.counts().Checkins; n != 0 {
		t.Fatalf("%d check-ins", n)
	}
}
