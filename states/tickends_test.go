package states_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/states"
	"github.com/tikali/monky-deployd/store"
)

// holdShared takes a shared flock on path, as status, explain or the bbolt CLI does, until the
// test ends or release is called.
func holdShared(t *testing.T, path string) (release func()) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			f.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// A reader that holds the state file past the tick's wait does not fail the tick: it exits 75
// (the timer's unit counts it a success) and its closing line names the holder and
// STATE_FILE_LOCKED; once the reader lets go, the next tick converges.
func TestAReaderPastTheTicksWaitIsExit75NamingIt(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.wantExit(h.tick(), 0)
	h.release("v2", nil)
	st, err := store.OpenBolt(h.cfg.StatePath(), store.BoltOptions{Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	release := holdShared(t, h.cfg.StatePath())
	a := h.agent()
	a.Store = st
	h.logs.Reset()
	res := a.Tick(context.Background())
	if res.Exit != vocab.ExitTemporary {
		t.Fatalf("exit %d (%v), want 75", res.Exit, res.Err)
	}
	closing := lastLine(t, h.logs.String())
	holder := fmt.Sprintf("held by pid %d", os.Getpid())
	if closing.Exit == nil || *closing.Exit != 75 || closing.Code != string(vocab.StateFileLocked) || !strings.Contains(closing.Message, holder) || closing.Level != "warn" {
		t.Errorf("closing line %+v, want exit 75, code %s, at warn, naming %q", closing, vocab.StateFileLocked, holder)
	}
	release()
	h.clock.Advance(time.Minute)
	h.wantExit(h.tick(), 0)
	h.wantConverged("after the reader let go")
}

// lastLine is the last JSON log line of logs.
func lastLine(t *testing.T, logs string) logLine {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	var l logLine
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &l); err != nil {
		t.Fatalf("not a log line: %q", lines[len(lines)-1])
	}
	return l
}

// A store write that fails while the box is settled (the takeover's first entry) still ends
// the tick: its end is committed once the disk takes writes, with its exit and the reason
// journaled, and it has its closing line.
func TestASettleFaultEndsTheTick(t *testing.T) {
	h := takeoverHarness(t, nil)
	a := h.agent()
	a.Store = &faultyStore{Store: h.st, at: 1, err: syscall.ENOSPC}
	h.logs.Reset()
	res := a.Tick(context.Background())
	if res.Exit != vocab.ExitFail || res.Tick == 0 {
		t.Fatalf("exit %d tick %d (%v), want 1 of a tick that began", res.Exit, res.Tick, res.Err)
	}
	closing := lastLine(t, h.logs.String())
	if closing.Exit == nil || *closing.Exit != 1 || !strings.Contains(closing.Message, "take over") {
		t.Errorf("closing line %+v, want exit 1 naming the takeover", closing)
	}
	var ticks []store.TickSummary
	var entries []store.Entry
	if err := h.st.View(func(tx store.Tx) error {
		var err error
		if ticks, err = tx.Ticks(5); err != nil {
			return err
		}
		entries, err = tx.Entries(res.Tick)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(ticks) != 1 || ticks[0].Tick != res.Tick || ticks[0].Exit == nil || *ticks[0].Exit != 1 {
		t.Fatalf("ticks %+v, want tick %d ended with exit 1", ticks, res.Tick)
	}
	if n := len(entries); n == 0 || entries[n-1].Code != vocab.LocalFailure || !strings.Contains(entries[n-1].Detail, "take over") {
		t.Errorf("entries %+v, want the takeover's failure journaled", entries)
	}
}

// bootstrap journals in a tick of its own: on a file with earlier ticks, its login is not an
// entry of the tick before it.
func TestBootstrapIsATickOfItsOwn(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.wantExit(h.tick(), 0)
	before := h.record().Tick
	entriesOf := func(n uint64) []store.Entry {
		var es []store.Entry
		if err := h.st.View(func(tx store.Tx) error { var err error; es, err = tx.Entries(n); return err }); err != nil {
			t.Fatal(err)
		}
		return es
	}
	had := len(entriesOf(before))
	h.freshGrant()
	if err := h.agent().BootstrapCommand(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	var ticks []store.TickSummary
	if err := h.st.View(func(tx store.Tx) error { var err error; ticks, err = tx.Ticks(1); return err }); err != nil {
		t.Fatal(err)
	}
	if prev := entriesOf(before); len(prev) != had {
		t.Errorf("tick %d (the one before bootstrap) got bootstrap's entries: %+v", before, prev[had:])
	}
	own := entriesOf(before + 1)
	if len(ticks) != 1 || ticks[0].Tick != before+1 || ticks[0].Action != vocab.ActionBootstrap || ticks[0].Exit == nil || *ticks[0].Exit != 0 {
		t.Fatalf("newest tick %+v, want tick %d, action bootstrap, exit 0", ticks, before+1)
	}
	if len(own) != 1 || own[0].Event != "bootstrap" {
		t.Errorf("bootstrap's tick holds %+v, want its login", own)
	}
	h.clock.Advance(time.Minute)
	h.wantExit(h.tick(), 0)
}

// resume --now hands its lock to its tick: a timer tick started between the two finds the lock
// held and goes no further, and the tick --now runs is the one that checks again.
func TestResumeNowHandsItsLockToItsTick(t *testing.T) {
	h := newHarness(t)
	h.release("v1", func(f map[string][]byte) { f[".env.template"] = append(f[".env.template"], "X=${UNSUPPLIED}\n"...) })
	h.wantExit(h.tick(), 1)
	if rec := h.record(); rec.State != "Refused" {
		t.Fatalf("state %s, want Refused", rec.State)
	}
	a := h.agent()
	cleared, held, err := a.ResumeHolding(false)
	if err != nil || len(cleared) == 0 {
		t.Fatalf("resume: %v %v", cleared, err)
	}
	defer held.Release()
	// the timer's tick, in the window between the resume and its tick
	timer := h.agent().Tick(context.Background())
	if timer.Exit != 0 || timer.Tick != 0 {
		t.Fatalf("a timer tick in resume --now's window: exit %d tick %d, want 0 without a tick", timer.Exit, timer.Tick)
	}
	res := a.TickHolding(context.Background(), held)
	if res.Tick == 0 {
		t.Fatalf("resume --now's tick did not run: exit %d (%v)", res.Exit, res.Err)
	}
	if rec := h.record(); rec.Tick != res.Tick {
		t.Errorf("the newest tick is %d, want resume --now's %d", rec.Tick, res.Tick)
	}
}

// A start that fails before the tick touches anything (docker's group, the transport) is a tick
// of its own in the journal, and its closing line carries the fields a tick's does: tick, exit
// and code.
func TestAFailedStartHasTheClosingLinesFields(t *testing.T) {
	h := newHarness(t)
	h.logs.Reset()
	cause := &effects.Error{Op: "docker", Kind: effects.Permanent, Code: vocab.DockerGroupMissing, Msg: "permission denied on /run/docker.sock"}
	res := h.agent().RecordStartFailure(cause)
	if res.Exit != 1 || res.Tick == 0 {
		t.Fatalf("exit %d tick %d, want 1 of a tick of its own", res.Exit, res.Tick)
	}
	var l struct {
		logLine
		Tick uint64 `json:"tick"`
	}
	lines := strings.Split(strings.TrimSpace(h.logs.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &l); err != nil {
		t.Fatal(err)
	}
	if l.Tick != res.Tick || l.Exit == nil || *l.Exit != 1 || l.Code != string(vocab.DockerGroupMissing) || l.Level != "error" || !strings.Contains(l.Message, "permission denied") {
		t.Errorf("closing line %+v, want tick %d, exit 1, code %s at error", l, res.Tick, vocab.DockerGroupMissing)
	}
}

// A heartbeat tick (nothing new to apply) past a reader's wait exits 75 with STATE_FILE_LOCKED
// naming the holder, like an apply tick: its exit is decided by ExitCode, not written by hand.
func TestAReaderPastAHeartbeatTicksWaitIsExit75(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.wantExit(h.tick(), 0)
	h.clock.Advance(time.Minute)
	st, err := store.OpenBolt(h.cfg.StatePath(), store.BoltOptions{Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	release := holdShared(t, h.cfg.StatePath())
	a := h.agent()
	a.Store = st
	h.logs.Reset()
	res := a.Tick(context.Background())
	if res.Exit != vocab.ExitTemporary {
		t.Fatalf("heartbeat exit %d (%v), want 75", res.Exit, res.Err)
	}
	closing := lastLine(t, h.logs.String())
	holder := fmt.Sprintf("held by pid %d", os.Getpid())
	if closing.Exit == nil || *closing.Exit != 75 || !strings.Contains(closing.Message, holder) {
		t.Errorf("closing line %+v, want exit 75 naming %q", closing, holder)
	}
	release()
	h.clock.Advance(time.Minute)
	h.wantExit(h.tick(), 0)
}

// Every kind of tick past a reader's wait exits 75 with STATE_FILE_LOCKED naming the holder:
// apply, heartbeat, refused, retire and bootstrap; once the reader lets go, the next tick runs.
func TestAReaderPastTheWaitIsExit75ForEveryTickKind(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(h *harness)
	}{
		{"apply", func(h *harness) { h.release("v2", nil) }},
		{"heartbeat", func(h *harness) {}},
		{"refused", func(h *harness) {
			h.release("v2", func(f map[string][]byte) {
				f["compose.override.yaml"] = []byte("services:\n  api:\n    image: x\n    privileged: true\n")
			})
		}},
		{"retire", func(h *harness) { h.sim.Retire(env, true) }},
		{"bootstrap", func(h *harness) { h.freshGrant() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.release("v1", nil)
			h.wantExit(h.tick(), 0)
			h.clock.Advance(time.Minute)
			c.setup(h)
			st, err := store.OpenBolt(h.cfg.StatePath(), store.BoltOptions{Timeout: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			release := holdShared(t, h.cfg.StatePath())
			a := h.agent()
			a.Store = st
			h.logs.Reset()
			holder := fmt.Sprintf("held by pid %d", os.Getpid())
			if c.name == "bootstrap" {
				err := a.BootstrapCommand(context.Background(), true)
				if got := states.ExitCode(err); got != vocab.ExitTemporary || err == nil || !strings.Contains(err.Error(), holder) {
					t.Fatalf("bootstrap exit %d (%v), want 75 naming %q", got, err, holder)
				}
			} else {
				res := a.Tick(context.Background())
				if res.Exit != vocab.ExitTemporary {
					t.Fatalf("%s exit %d (%v), want 75", c.name, res.Exit, res.Err)
				}
				closing := lastLine(t, h.logs.String())
				if closing.Exit == nil || *closing.Exit != 75 || !strings.Contains(closing.Message, holder) {
					t.Errorf("closing line %+v, want exit 75 naming %q", closing, holder)
				}
			}
			release()
			h.clock.Advance(time.Minute)
			if c.name != "refused" {
				h.wantExit(h.tick(), 0)
			} else {
				h.tick()
			}
		})
	}
}
