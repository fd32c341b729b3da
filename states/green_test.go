package states_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/budget"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/states"
	"github.com/tikali/monky-deployd/store"
)

// Green means serving (AGENT.md, amendments of 2026-12-04): health is judged against the
// services of the checked model, through compose ps --all, never against what compose happens
// to list; and a heartbeat heals the applied release within heal_budget.

// withMigrate adds a one-shot (restart: "no") to the standard test backend.
func withMigrate(f map[string][]byte) {
	f["compose.yaml"] = append(f["compose.yaml"], []byte(`  migrate:
    image: harbor.example/monky/api:migrate
    restart: "no"
`)...)
}

// notes are the journal's entries of event, oldest first.
func (h *harness) notes(event string) []store.Entry {
	var out []store.Entry
	for _, e := range h.entries() {
		if e.Event == event {
			out = append(out, e)
		}
	}
	return out
}

// entries are the journal's entries, oldest first.
func (h *harness) entries() []store.Entry {
	h.t.Helper()
	var out []store.Entry
	if err := h.st.View(func(tx store.Tx) error {
		return tx.AllEntries(func(e store.Entry) error {
			out = append(out, e)
			return nil
		})
	}); err != nil {
		h.t.Fatal(err)
	}
	return out
}

func (h *harness) wantReport(result string, code vocab.Code, words ...string) {
	h.t.Helper()
	got, detail := h.lastReport()
	if got != result || (code != "" && !strings.HasPrefix(detail, string(code)+":")) {
		h.t.Fatalf("report %s %q, want %s %s", got, detail, result, code)
	}
	for _, w := range words {
		if !strings.Contains(detail, w) {
			h.t.Errorf("report %q does not say %q", detail, w)
		}
	}
}

func TestOneShotThatFailsIsRed(t *testing.T) {
	h := newHarness(t)
	h.release("v1", withMigrate)
	h.dockerKnob("exited", "migrate 3\n")
	h.wantExit(h.tick(), 1)
	h.wantReport("failed", vocab.Unhealthy, "migrate (exited 3)", "which nothing restarts")
	// restart "no": the exit is final, so the gate fails at its first look, not after
	// healthy_timeout_s
	fails := h.notes(machine.EvFail)
	if len(fails) != 1 || fails[0].Ms >= 300_000 {
		t.Errorf("fail entries %+v: the gate waited for an exit nothing restarts", fails)
	}
	if rec := h.record(); rec.Failure == nil || rec.Failure.Reason != vocab.ReasonExited {
		t.Errorf("failure %+v, want the reason %s", rec.Failure, vocab.ReasonExited)
	}
}

func TestOneShotThatCompletesIsGreen(t *testing.T) {
	h := newHarness(t)
	h.release("v1", withMigrate)
	h.dockerKnob("exited", "migrate 0\n")
	h.wantConverged("a migration that exited 0")
	es := h.notes(machine.EvHealthy)
	if len(es) == 0 || !strings.Contains(es[len(es)-1].Detail, "2/2 services healthy, 1 completed (migrate)") {
		t.Errorf("healthy entries %+v", es)
	}
	h.wantConverged("its heartbeat") // a completed one-shot stays green
}

func TestCrashLoopNeverPasses(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.dockerKnob("restarting", "worker\n")
	h.wantExit(h.tick(), 1)
	h.wantReport("failed", vocab.Unhealthy, "worker (restarting")
}

// A service that is up only a few seconds at every look (it restarts between them) never
// stays up min_healthy_s: the gate does not pass, however often it is running when looked at.
func TestFreshRestartsNeverPassTheWindow(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.dockerKnob("uptime", "3 seconds")
	h.wantExit(h.tick(), 1)
	h.wantReport("failed", vocab.Unhealthy, "api (up 3s of 10s), worker (up 3s of 10s) did not stay up min_healthy_s (10 s)")
	h.dockerKnob("uptime", "")
	h.clock.Advance(3 * time.Minute)
	h.wantExit(h.tick(), 0) // the retry: up long enough now
}

func TestMissingServiceIsNamed(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	h.dockerKnob("gone", "worker\n")
	h.appendConfig("heal: false\n")
	h.wantExit(h.tick(), 1)
	h.wantReport("failed", vocab.Unhealthy, "worker (no container)")
}

func TestHeartbeatHealsAKilledService(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	ups := countUps(h.composeCalls())
	h.dockerKnob("killed", "api\n")
	h.wantExit(h.tick(), 0)
	if n := countUps(h.composeCalls()); n != ups+1 {
		t.Errorf("compose up ran %d times for the heal, want 1", n-ups)
	}
	heal, healed := h.notes(machine.NoteHeal), h.notes(machine.NoteHealed)
	if len(heal) != 1 || !strings.Contains(heal[0].Detail, "api (exited 137)") || !strings.Contains(heal[0].Detail, "heal 1 of heal_budget 3") {
		t.Errorf("heal notes %+v", heal)
	}
	if len(healed) != 1 || !strings.HasPrefix(healed[0].Detail, "HEALED: found api (exited 137); ran compose up -d") {
		t.Errorf("healed notes %+v", healed)
	}
	h.wantReport("applied", "")
	if c := h.sim.Counts(env); c.Leases != 1 {
		t.Errorf("leases %d: a heal takes no lease", c.Leases)
	}
	if rec := h.record(); len(rec.Heals) != 1 || rec.State != string(machine.Reported) {
		t.Errorf("record: heals %v, state %s", rec.Heals, rec.State)
	}
}

func TestHealBudgetThenCrashLoop(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	for i := 1; i <= 3; i++ {
		h.dockerKnob("killed", "worker\n")
		h.wantExit(h.tick(), 0)
	}
	ups := countUps(h.composeCalls())
	h.dockerKnob("killed", "worker\n")
	h.wantExit(h.tick(), 1)
	h.wantReport("failed", vocab.CrashLoop, "worker (exited 137)", "heal_budget 3")
	if n := countUps(h.composeCalls()); n != ups {
		t.Errorf("past the budget compose up ran %d more times", n-ups)
	}
	// an hour after the first heal the budget frees one: the box heals again
	h.clock.Advance(time.Hour)
	h.wantExit(h.tick(), 0)
	h.wantReport("applied", "")
}

// A service the engine restarted between two heartbeats is running at both: the heartbeat tells
// it by its Up, shorter than the time since it was seen running with the same ID, and heals it
// within the budget; one that restarts every minute needs a person within the hour.
func TestARestartBetweenHeartbeatsIsSeen(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	h.dockerKnob("uptime", "About a minute") // up 1 to 2 minutes, seen running a minute ago: no restart
	h.wantExit(h.tick(), 0)
	if heal := h.notes(machine.NoteHeal); len(heal) != 0 {
		t.Fatalf("a container up about a minute, seen running a minute ago, was healed: %+v", heal)
	}
	h.dockerKnob("uptime", "")
	for i := 1; i <= 3; i++ { // each tick a minute after the last
		h.dockerKnob("restarted", "api\n")
		h.wantExit(h.tick(), 0)
	}
	heal, healed := h.notes(machine.NoteHeal), h.notes(machine.NoteHealed)
	if len(heal) != 3 || !strings.Contains(heal[0].Detail, "found api (restarted since it was seen running 1m0s ago: Up 2 seconds)") {
		t.Errorf("heal notes %+v", heal)
	}
	if len(healed) != 3 || !strings.HasPrefix(healed[0].Detail, "HEALED: found api (restarted since it was seen running") {
		t.Errorf("healed notes %+v", healed)
	}
	h.dockerKnob("restarted", "api\n")
	h.wantExit(h.tick(), 1)
	h.wantReport("failed", vocab.CrashLoop, "api (restarted since it was seen running 1m0s ago: Up 2 seconds)", "heal_budget 3")
	if c := h.sim.Counts(env); c.Leases != 1 {
		t.Errorf("leases %d: a heal takes no lease", c.Leases)
	}
}

func TestHealOffReportsOnly(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	h.appendConfig("heal: false\n")
	ups := countUps(h.composeCalls())
	h.dockerKnob("killed", "api\n")
	h.wantExit(h.tick(), 1)
	h.wantReport("failed", vocab.Unhealthy, "api (exited 137)")
	if n := countUps(h.composeCalls()); n != ups {
		t.Errorf("heal: false, yet compose up ran %d times", n-ups)
	}
}

func countUps(calls []string) int {
	n := 0
	for _, c := range calls {
		if strings.Contains(c, " up ") {
			n++
		}
	}
	return n
}

// The engine is asked before any lease: with the daemon stopped the CLI and its compose plugin
// still answer, and an apply used to spend a lease and read secrets before compose pull failed
// with words that blamed a registry.
func TestEngineDownBeforeTheLease(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.dockerKnob("engine-down", "1")
	h.wantExit(h.tick(), 75)
	if c := h.sim.Counts(env); c.Leases != 0 {
		t.Errorf("leases %d with the engine down, want 0", c.Leases)
	}
	if n := len(h.composeCalls()); n != 0 {
		t.Errorf("compose ran with the engine down: %v", h.composeCalls())
	}
	ends := h.notes(machine.NoteTickEnd)
	if len(ends) == 0 || ends[len(ends)-1].Code != vocab.DockerEngineDown || !strings.Contains(ends[len(ends)-1].Detail, "Docker engine does not answer") {
		t.Errorf("tick-end entries %+v", ends)
	}
	h.dockerKnob("engine-down", "")
	h.wantExit(h.tick(), 0)
}

// A parked box's closing line names the resume a person types on this box: with its own
// --config (the harness' config is never the packaged default).
func TestParkedLineCarriesTheBoxsConfig(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.dockerKnob("pull-error", "Error response from daemon: manifest unknown")
	h.failedTicks(5, 40*time.Minute)
	h.logs.Reset()
	h.wantExit(h.tick(), 1)
	want := "parked until `sudo -u monky-deployd monky-deployd --config " + h.cfg.Path + " resume`"
	if !strings.Contains(h.logs.String(), want) {
		t.Errorf("the parked tick's lines do not say %q:\n%s", want, h.logs.String())
	}
}

// TestLinesNameTheUserTheTicksRunAs: a box whose agent runs as another user than the packaged
// one (a hand install, a laptop) records that user, and the lines a person reads name it — the
// parked line's resume, explain's fix — never monky-deployd.
func TestLinesNameTheUserTheTicksRunAs(t *testing.T) {
	defer func(f func() string) { states.UserName = f }(states.UserName)
	states.UserName = func() string { return "ops" }
	h := newHarness(t)
	h.release("v1", nil)
	h.dockerKnob("pull-error", "Error response from daemon: manifest unknown")
	h.failedTicks(5, 40*time.Minute)
	h.logs.Reset()
	h.wantExit(h.tick(), 1)
	if u := h.record().Box.User; u != "ops" {
		t.Errorf("the record's user %q, want ops", u)
	}
	want := "parked until `sudo -u ops monky-deployd --config " + h.cfg.Path + " resume`"
	if !strings.Contains(h.logs.String(), want) || strings.Contains(h.logs.String(), "-u monky-deployd") {
		t.Errorf("the parked tick's lines do not say %q:\n%s", want, h.logs.String())
	}
	doc, err := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if doc.Why == nil || !strings.Contains(doc.Why.Fix+doc.Next, "sudo -u ops ") || strings.Contains(doc.Why.Fix+doc.Next, "-u monky-deployd") {
		t.Errorf("explain does not name the ticks' user: %+v\nnext: %s", doc.Why, doc.Next)
	}
}

// A refused sha checked again says "space freed" only when free space grew; a headroom the
// config lowered passes the check with no space freed, and says so.
func TestRecheckSaysWhatChanged(t *testing.T) {
	for _, c := range []struct {
		name, want string
		change     func(h *harness)
	}{
		{"space freed", "recheck: space freed (", func(h *harness) { h.disk.free = 500 << 30 }},
		{"headroom lowered", "the disk check passes now (", func(h *harness) {
			h.rewriteConfig("state_dir:", "disk:\n  headroom_bytes: 268435456\nstate_dir:")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.disk.free = 5 << 30
			h.release("v1", func(f map[string][]byte) { f["bundle.json"] = []byte(`{"disk_need_bytes": 3221225472}`) })
			h.wantExit(h.tick(), 1)
			c.change(h)
			h.wantExit(h.tick(), 0)
			es := h.notes(machine.EvRecheck)
			if len(es) != 1 || !strings.Contains(es[0].Event+": "+es[0].Detail, c.want) {
				t.Errorf("recheck entries %+v, want %q", es, c.want)
			}
		})
	}
}

// A loader child that cannot start or answer (the binary removed, or replaced by one that
// speaks another version, under a running agent) is temporary and never remembered for the sha:
// the next tick loads the release again and applies it.
func TestLoaderUnavailableIsTemporary(t *testing.T) {
	script := filepath.Join(t.TempDir(), "other-version")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'budget: request version 2, this loader speaks 3' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, exe := range map[string]string{"removed": filepath.Join(t.TempDir(), "gone"), "another version": script} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.release("v1", nil)
			restore := budget.SetExecutable(exe)
			h.wantExit(h.tick(), 75)
			restore()
			rec := h.record()
			if rec.Refusal != nil || rec.Failure != nil {
				t.Errorf("a loader that did not answer was remembered: refusal %+v failure %+v", rec.Refusal, rec.Failure)
			}
			var coded []store.Entry
			for _, e := range h.entries() {
				if e.Code == vocab.LoaderUnavailable {
					coded = append(coded, e)
				}
			}
			if len(coded) == 0 || !strings.Contains(coded[0].Detail, "could not start or answer") {
				t.Errorf("no entry names LOADER_UNAVAILABLE: %+v", h.entries())
			}
			if c := h.sim.Counts(env); c.Leases != 0 {
				t.Errorf("leases %d before the bundle was judged", c.Leases)
			}
			h.wantExit(h.tick(), 0)
		})
	}
}
