package main

// A reader never fails the timer's tick; every run ends with a closing line that carries the
// fields a tick's closing line carries; no special file in state_dir makes a command hang.

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/machine/metrics"
	"github.com/tikali/monky-deployd/store"
)

// A shared lock on state.db held longer than a reader waits (status, explain: 1 s), as the
// bbolt CLI or a slow explain holds it, while the timer's tick runs: the tick waits for it and
// ends with exit 0 (or 75 past its own wait), never 1, and a later explain shows the tick.
func TestAReaderHoldingTheStateFileNeverFailsTheTick(t *testing.T) {
	b := startBox(t)
	b.Desire("v1")
	b.tick(0)
	before := len(b.explainJSON().Ticks)
	b.Desire("v2")

	f, err := os.Open(filepath.Join(b.StateDir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	hold := 3 * store.ReaderWait // longer than a reader waits, shorter than the tick waits
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(hold)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}()
	_, e, c := b.agent("run", "--once")
	wg.Wait()
	if c != 0 && c != 75 {
		t.Fatalf("a tick with a reader holding state.db for %v: exit %d, want 0 or 75; stderr:\n%s", hold, c, e)
	}
	d := b.explainJSON()
	if before == 0 || len(d.Ticks) == 0 || d.Ticks[0].Exit != c {
		t.Errorf("explain after the tick: %+v, want the tick's exit %d first", d.Ticks, c)
	}
	if c == 0 && d.Ticks[0].Action != "apply" {
		t.Errorf("explain's newest tick is %+v, want the apply of v2", d.Ticks[0])
	}
}

// Every failure before the tick begins ends with the closing line a tick has: under journald,
// its priority, `exit N: words` and the exit and code fields (env_id once the config is read).
func TestEarlyEndsCarryTheClosingLinesFields(t *testing.T) {
	b := startBox(t)
	b.tick(0)
	cases := []struct {
		name  string
		plant func()
		want  []string
	}{
		{"config", func() { b.AppendConfig("healthy_timeot_s: 60\n") },
			[]string{"<3>exit 1: ", `did you mean "healthy_timeout_s"`, "exit=1", "code=CONFIG_INVALID"}},
		{"trust", func() {
			if err := os.Chmod(b.StateDir, 0o777); err != nil {
				t.Fatal(err)
			}
		}, []string{"<3>exit 1: ", "group- or world-writable", "exit=1", "code=LOCAL_FAILURE", "env_id=" + demoEnv}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, _ := os.ReadFile(b.Config())
			defer func() {
				_ = os.WriteFile(b.Config(), cfg, 0o640)
				_ = os.Chmod(b.StateDir, 0o700)
			}()
			c.plant()
			code, lines := b.journal("run", "--once")
			if code != 1 || len(lines) == 0 {
				t.Fatalf("exit %d, lines %q", code, lines)
			}
			last := lines[len(lines)-1]
			for _, w := range c.want {
				if !strings.Contains(last, w) {
					t.Errorf("closing line %q lacks %q", last, w)
				}
			}
		})
	}
}

// No FIFO planted in state_dir, as any file a command opens there, makes that command hang:
// each ends by itself (with whatever exit it decides), none is killed. state.json (0.1.x's) is
// read only by the takeover of a box without a state file: it is planted on one.
func TestAFIFOInStateDirHangsNoCommand(t *testing.T) {
	names := []string{"lock", "state.db", "state.db" + store.ReceiptSuffix, "bao.token", metrics.CountersFile, "state.json", "docker/config.json"}
	commands := [][]string{{"run", "--once"}, {"status"}, {"explain"}, {"resume"}, {"bootstrap"}}
	for _, name := range names {
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			b := startBox(t)
			b.Desire("v1")
			b.tick(0)
			b.metricsFile()
			if name == "state.json" {
				for _, f := range []string{"state.db", "state.db" + store.ReceiptSuffix} {
					if err := os.Remove(filepath.Join(b.StateDir, f)); err != nil && !os.IsNotExist(err) {
						t.Fatal(err)
					}
				}
			}
			p := filepath.Join(b.StateDir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range commands {
				r := b.RunKilled(60*time.Second, "monky-deployd", nil, append([]string{"--config", b.Config()}, args...)...)
				if r.Sig != 0 {
					t.Errorf("%v with a FIFO as %s hung (killed after %v)", args, name, r.Took.Round(time.Second))
				}
			}
		})
	}
}
