package states_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
)

// The last good release keeps serving (AGENT.md, amendments of 2026-12-04): a release whose
// bundle consents (agent.revert_on_failure) and fails its apply brings back, in the same tick,
// the release last healthy on this box — no lease, no OpenBao read — and is remembered.

// withConsent is a release's mutation whose bundle.json consents to a revert on failure.
func withConsent(f map[string][]byte) {
	f["bundle.json"] = []byte(`{"agent": {"revert_on_failure": true}}`)
}

// withBrokenCanary adds a service that exits 3 at every start, which nothing restarts (a
// release that cannot serve, known at the gate's first look).
func withBrokenCanary(f map[string][]byte) {
	f["compose.yaml"] = append(f["compose.yaml"], []byte(`  canary:
    image: harbor.example/monky/api:canary
    restart: "no"
`)...)
}

func consentingBroken(f map[string][]byte) { withConsent(f); withBrokenCanary(f) }

// newRevertHarness is a harness whose health gate gives up after 30 s of its clock: every case
// here waits out a gate that cannot pass, each look a run of the docker stub.
func newRevertHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.appendConfig("healthy_timeout_s: 30\n")
	return h
}

// current is the sha `current` points at.
func (h *harness) current() string {
	h.t.Helper()
	target, err := os.Readlink(filepath.Join(h.dir, "state", env, "current"))
	if err != nil {
		h.t.Fatal(err)
	}
	return filepath.Base(target)
}

func TestRevertBringsBackTheLastHealthyRelease(t *testing.T) {
	h := newRevertHarness(t)
	v1 := h.apply("v1")
	h.dockerKnob("exited", "canary 3\n")
	v2 := h.release("v2", consentingBroken)
	before := h.sim.Counts(env)
	ups := countUps(h.composeCalls())
	h.wantExit(h.tick(), 1)

	reps := h.sim.Reports(env)
	rep := reps[len(reps)-1]
	if rep.Result != "failed" || rep.Sha != v2 || rep.RevertedTo != v1 {
		t.Fatalf("report %s for %s reverted_to %q; want failed for v2 reverted_to v1", rep.Result, machine.ShortSha(rep.Sha), rep.RevertedTo)
	}
	for _, w := range []string{"UNHEALTHY: ", "canary (exited 3)", "reverted to " + machine.ShortSha(v1)} {
		if !strings.Contains(rep.Detail, w) {
			t.Errorf("report %q does not say %q", rep.Detail, w)
		}
	}
	if rep.Why == nil || rep.Why.Verdict != "needs_person" {
		t.Errorf("report why %+v, want the verdict needs_person", rep.Why)
	}
	if n := countUps(h.composeCalls()) - ups; n != 2 {
		t.Errorf("compose up ran %d times, want 2 (v2, then v1 again)", n)
	}
	if h.current() != v1 {
		t.Errorf("current → %s, want v1 back", machine.ShortSha(h.current()))
	}
	after := h.sim.Counts(env)
	if after.KVReads-before.KVReads != 2 {
		t.Errorf("%d OpenBao reads in the tick, want v2's 2 only: the revert reads none", after.KVReads-before.KVReads)
	}
	rec := h.record()
	if rec.State != string(machine.Failed) || !rec.Parked || rec.AppliedSha != v1 || rec.Failure == nil || !rec.Failure.Reverted || rec.Failure.RevertTo != v1 {
		t.Fatalf("record: state %s parked %t applied %s failure %+v", rec.State, rec.Parked, machine.ShortSha(rec.AppliedSha), rec.Failure)
	}
	if es := h.notes(machine.EvRevert); len(es) != 1 || !strings.Contains(es[0].Detail, "agent.revert_on_failure") {
		t.Errorf("revert entries %+v", es)
	}
	if es := h.notes(machine.EvReverted); len(es) != 1 || !strings.Contains(es[0].Detail, "reverted to "+machine.ShortSha(v1)) {
		t.Errorf("reverted entries %+v", es)
	}

	// the failed sha is remembered: the next ticks do not apply it again, and check in with v1
	ups, before = countUps(h.composeCalls()), h.sim.Counts(env)
	h.wantExit(h.tick(), 1)
	if n := countUps(h.composeCalls()) - ups; n != 0 {
		t.Errorf("the reverted sha was applied again (%d compose up)", n)
	}
	if c := h.sim.Counts(env); c.Leases != before.Leases || c.KVReads != before.KVReads || c.BundleFetches != before.BundleFetches {
		t.Errorf("a remembered revert leased, read or fetched: %+v → %+v", before, c)
	}
	if req, _ := h.sim.LastCheckin(env); req.AppliedSha != v1 {
		t.Errorf("check-in applied %s, want v1", machine.ShortSha(req.AppliedSha))
	}
	w := h.explainWhy()
	if w == nil || w.Verdict != "needs_person" || !strings.Contains(w.Next, machine.ShortSha(v1)+", serves again") {
		t.Errorf("explain's why %+v", w)
	}

	// resume lets v2 be tried again
	if _, err := h.agent().Resume(false); err != nil {
		t.Fatal(err)
	}
	ups = countUps(h.composeCalls())
	h.wantExit(h.tick(), 1)
	if n := countUps(h.composeCalls()) - ups; n != 2 {
		t.Errorf("after resume compose up ran %d times, want 2 (v2 again, then the revert)", n)
	}

	// a new desired sha clears it
	h.dockerKnob("exited", "")
	v3 := h.release("v3", withConsent)
	h.wantConverged("a new desired sha after a revert")
	if rec := h.record(); rec.AppliedSha != v3 || rec.Failure != nil || h.current() != v3 {
		t.Errorf("after v3: applied %s failure %+v current %s", machine.ShortSha(rec.AppliedSha), rec.Failure, machine.ShortSha(h.current()))
	}
}

func TestNoConsentNoRevert(t *testing.T) {
	h := newRevertHarness(t)
	h.apply("v1")
	h.dockerKnob("exited", "canary 3\n")
	v2 := h.release("v2", withBrokenCanary)
	h.wantExit(h.tick(), 1)
	h.wantReport("failed", vocab.Unhealthy, "canary (exited 3)")
	rec := h.record()
	if rec.Parked || rec.Failure == nil || rec.Failure.RevertTo != "" || h.current() != v2 {
		t.Errorf("without consent: parked %t failure %+v current %s", rec.Parked, rec.Failure, machine.ShortSha(h.current()))
	}
	if es := h.notes(machine.EvRevert); len(es) != 0 {
		t.Errorf("reverted without consent: %+v", es)
	}
	if reps := h.sim.Reports(env); reps[len(reps)-1].RevertedTo != "" {
		t.Errorf("reverted_to without consent")
	}
}

func TestConsentWithNothingToRevertTo(t *testing.T) {
	h := newRevertHarness(t)
	h.dockerKnob("exited", "canary 3\n")
	h.release("v1", consentingBroken)
	h.wantExit(h.tick(), 1)
	h.wantReport("failed", vocab.Unhealthy, "not reverted: no release was ever healthy on this box")
	if rec := h.record(); rec.Parked || rec.Failure.RevertTo != "" {
		t.Errorf("record %+v", rec.Failure)
	}
}

func TestRevertThatFailsTooStops(t *testing.T) {
	h := newRevertHarness(t)
	v1 := h.apply("v1")
	h.dockerKnob("exited", "canary 3\nworker 2\n") // v1's worker fails now too
	h.release("v2", consentingBroken)
	h.wantExit(h.tick(), 1)
	h.wantReport("failed", vocab.Unhealthy, "the revert to "+machine.ShortSha(v1)+" failed too", "worker (exited 2)", "not reverting again")
	if reps := h.sim.Reports(env); reps[len(reps)-1].RevertedTo != "" {
		t.Errorf("reverted_to on a revert that failed")
	}
	rec := h.record()
	if !rec.Parked || rec.Failure.Reverted || rec.Failure.RevertFailed == "" {
		t.Errorf("record: parked %t failure %+v", rec.Parked, rec.Failure)
	}
	ups := countUps(h.composeCalls())
	h.wantExit(h.tick(), 1)
	if n := countUps(h.composeCalls()) - ups; n != 0 {
		t.Errorf("a box whose revert failed ran compose up %d more times", n)
	}
}

// TestAHoldKeepsAParkedRevert: a box held while a reverted sha is parked keeps the park: the
// held ticks heartbeat nothing that forgets it, and once the hold is released the failed sha is
// still not applied again (before, the held heartbeat cleared the failure and the release of
// the hold brought the broken sha back).
func TestAHoldKeepsAParkedRevert(t *testing.T) {
	h := newRevertHarness(t)
	v1 := h.apply("v1")
	h.dockerKnob("exited", "canary 3\n")
	v2 := h.release("v2", consentingBroken)
	h.wantExit(h.tick(), 1)
	if rec := h.record(); rec.Failure == nil || !rec.Failure.Reverted {
		t.Fatalf("no parked revert to hold: %+v", rec.Failure)
	}
	if _, err := h.agent().Hold(h.clock.Now().Add(time.Hour), "looking at v2 by hand"); err != nil {
		t.Fatal(err)
	}
	h.tick()
	if rec := h.record(); rec.Failure == nil || rec.Failure.Sha != v2 || !rec.Parked {
		t.Fatalf("held: the park is forgotten: failure %+v parked %t", rec.Failure, rec.Parked)
	}
	if _, err := h.agent().ReleaseHold(); err != nil {
		t.Fatal(err)
	}
	ups := countUps(h.composeCalls())
	h.wantExit(h.tick(), 1)
	if n := countUps(h.composeCalls()) - ups; n != 0 {
		t.Errorf("after the hold the reverted sha was applied again (%d compose up)", n)
	}
	if rec := h.record(); rec.AppliedSha != v1 || h.current() != v1 {
		t.Errorf("after the hold: applied %s current %s, want v1 serving", machine.ShortSha(rec.AppliedSha), machine.ShortSha(h.current()))
	}
}

// TestAParkedRevertKeepsTheServingReleaseHealed: while the reverted sha is parked, each tick
// judges the release it brought back as a heartbeat does and heals it within heal_budget (no
// lease, no OpenBao read); the park stays (before, a service of the serving release killed
// while the revert was parked stayed down, and the words said it served).
func TestAParkedRevertKeepsTheServingReleaseHealed(t *testing.T) {
	h := newRevertHarness(t)
	v1 := h.apply("v1")
	h.dockerKnob("exited", "canary 3\n")
	v2 := h.release("v2", consentingBroken)
	h.wantExit(h.tick(), 1)
	before, ups := h.sim.Counts(env), countUps(h.composeCalls())
	h.dockerKnob("killed", "api\n")
	h.wantExit(h.tick(), 1)
	if n := countUps(h.composeCalls()) - ups; n != 1 {
		t.Errorf("compose up ran %d times, want 1: the heal of v1", n)
	}
	if healed := h.notes(machine.NoteHealed); len(healed) != 1 || !strings.Contains(healed[0].Detail, "api (exited 137)") || !strings.Contains(healed[0].Detail, machine.ShortSha(v1)) {
		t.Errorf("healed notes %+v, want one naming api and v1", healed)
	}
	if c := h.sim.Counts(env); c.Leases != before.Leases || c.KVReads != before.KVReads {
		t.Errorf("the heal leased or read: %+v → %+v", before, c)
	}
	rec := h.record()
	if rec.State != string(machine.Failed) || !rec.Parked || rec.Failure == nil || rec.Failure.Sha != v2 || rec.AppliedSha != v1 || h.current() != v1 {
		t.Fatalf("record: state %s parked %t failure %+v applied %s", rec.State, rec.Parked, rec.Failure, machine.ShortSha(rec.AppliedSha))
	}
}

// TestAParkedRevertSaysWhenTheReleaseItBroughtBackIsDown: while the reverted sha is parked, a
// heal of the release brought back records what runs now, and once heal_budget is spent the
// tick says that release is not serving (CRASH_LOOP, naming the service) in its journal entry
// and in explain, instead of "serves again"; no report is sent again, nothing is leased or
// fetched, the park stays, and the next heal the budget allows clears the words (before, the
// record said the killed service had exited after it was healed, and explain went on saying
// the release served while it was down).
func TestAParkedRevertSaysWhenTheReleaseItBroughtBackIsDown(t *testing.T) {
	h := newRevertHarness(t)
	h.appendConfig("heal_budget: 1\n")
	v1 := h.apply("v1")
	h.dockerKnob("exited", "canary 3\n")
	v2 := h.release("v2", consentingBroken)
	h.wantExit(h.tick(), 1)
	reports, before := len(h.sim.Reports(env)), h.sim.Counts(env)

	h.dockerKnob("killed", "api\n")
	h.wantExit(h.tick(), 1)
	if healed := h.notes(machine.NoteHealed); len(healed) != 1 {
		t.Fatalf("healed notes %+v, want the heal of v1", healed)
	}
	for _, c := range h.record().Containers {
		if c.State != "running" {
			t.Errorf("after the heal the record holds %s %s: want what runs now", c.Service, c.State)
		}
	}

	h.dockerKnob("killed", "api\n")
	ups := countUps(h.composeCalls())
	h.wantExit(h.tick(), 1)
	if n := countUps(h.composeCalls()) - ups; n != 0 {
		t.Errorf("compose up ran %d times past heal_budget", n)
	}
	es := h.notes(machine.NoteCheckin)
	last := es[len(es)-1]
	if last.Code != vocab.CrashLoop || !strings.Contains(last.Detail, machine.ShortSha(v1)+", which is not serving: api (exited 137)") || !strings.Contains(last.Detail, "not healed again") {
		t.Errorf("the parked tick's entry: %s %q; want CRASH_LOOP naming api and v1 not serving", last.Code, last.Detail)
	}
	w := h.explainWhy()
	if w == nil || w.Verdict != "needs_person" || strings.Contains(w.Next, "serves again") ||
		!strings.Contains(w.Next, machine.ShortSha(v1)+", was brought back but is not serving now: CRASH_LOOP: api (exited 137)") || !strings.Contains(w.Next, machine.ShortSha(v2)+" is not applied again") {
		t.Errorf("explain's why %+v; want v1 not serving (CRASH_LOOP, api) and v2 still parked", w)
	}
	if n := len(h.sim.Reports(env)); n != reports {
		t.Errorf("%d reports sent while parked, want none: the failed one with reverted_to was sent once", n-reports)
	}
	if c := h.sim.Counts(env); c.Leases != before.Leases || c.KVReads != before.KVReads || c.BundleFetches != before.BundleFetches {
		t.Errorf("a parked tick leased, read or fetched: %+v → %+v", before, c)
	}
	if rec := h.record(); rec.State != string(machine.Failed) || !rec.Parked || rec.Failure == nil || rec.Failure.Sha != v2 || rec.AppliedSha != v1 {
		t.Fatalf("record: state %s parked %t failure %+v applied %s", rec.State, rec.Parked, rec.Failure, machine.ShortSha(rec.AppliedSha))
	}

	// an hour on, the budget allows a heal again: v1 serves, and the words say so
	h.clock.Advance(time.Hour)
	h.dockerKnob("uptime", "2 hours\n")
	h.wantExit(h.tick(), 1)
	if healed := h.notes(machine.NoteHealed); len(healed) != 2 {
		t.Errorf("healed notes %d, want a second heal once the hour passed", len(healed))
	}
	if w := h.explainWhy(); w == nil || !strings.Contains(w.Next, machine.ShortSha(v1)+", serves again") {
		t.Errorf("explain's why after the heal %+v; want v1 serving again", w)
	}
}

// TestAHeldParkedRevertJudgesWhatServes: a box held while a reverted sha is parked still judges
// the release the revert brought back at every tick (the same look, the same words), heals
// nothing while held and says so; its check-ins say the failed sha stays parked when the hold
// ends (not that its apply waits for the hold), with the verdict explain gives. When the hold
// ends by itself, the next tick heals that release within heal_budget and still applies, leases
// and fetches nothing of the failed sha (before, the held ticks looked at nothing and the
// check-ins said the failed sha's apply waited for the hold).
func TestAHeldParkedRevertJudgesWhatServes(t *testing.T) {
	h := newRevertHarness(t)
	v1 := h.apply("v1")
	h.dockerKnob("exited", "canary 3\n")
	v2 := h.release("v2", consentingBroken)
	h.wantExit(h.tick(), 1)
	if _, err := h.agent().Hold(h.clock.Now().Add(5*time.Minute), "looking at v2 by hand"); err != nil {
		t.Fatal(err)
	}
	before, ups := h.sim.Counts(env), countUps(h.composeCalls())
	h.dockerKnob("killed", "api\n")
	h.wantExit(h.tick(), 1)
	if n := countUps(h.composeCalls()) - ups; n != 0 {
		t.Errorf("compose up ran %d times while held, want none", n)
	}
	es := h.notes(machine.NoteCheckin)
	if last := es[len(es)-1]; last.Tick != h.record().Tick || !strings.Contains(last.Detail, machine.ShortSha(v1)+", which is not serving: api (exited 137); not healed: held by") {
		t.Errorf("the held tick's entry %+v; want v1 judged: api down, not healed while held", last)
	}
	if w := h.explainWhy(); w == nil || !strings.Contains(w.Next, "not serving now: UNHEALTHY: api (exited 137); not healed: held by") {
		t.Errorf("explain's why while held %+v", w)
	}
	ci, _ := h.sim.LastCheckin(env)
	if ci.Why == nil || ci.Why.Code != string(vocab.Held) || ci.Why.Verdict != "needs_person" || strings.Contains(ci.Why.Next, "waits until the hold ends") ||
		!strings.Contains(ci.Why.Next, machine.ShortSha(v2)+" stays parked (UNHEALTHY) when the hold ends") {
		t.Errorf("the held check-in's why %+v; want HELD, needs_person, v2 staying parked", ci.Why)
	}

	// the hold ends by itself: the next tick heals v1, and v2 is still not tried
	h.clock.Advance(5 * time.Minute)
	h.wantExit(h.tick(), 1)
	if n := countUps(h.composeCalls()) - ups; n != 1 {
		t.Errorf("compose up ran %d times since the hold, want 1: the heal of v1", n)
	}
	if healed := h.notes(machine.NoteHealed); len(healed) != 1 || !strings.Contains(healed[0].Detail, machine.ShortSha(v1)) {
		t.Errorf("healed notes %+v, want the heal of v1 once the hold ended", healed)
	}
	if c := h.sim.Counts(env); c.Leases != before.Leases || c.KVReads != before.KVReads || c.BundleFetches != before.BundleFetches {
		t.Errorf("a parked tick leased, read or fetched: %+v → %+v", before, c)
	}
	if rec := h.record(); rec.State != string(machine.Failed) || !rec.Parked || rec.Failure == nil || rec.Failure.Sha != v2 || rec.AppliedSha != v1 || h.current() != v1 {
		t.Fatalf("after the hold: state %s parked %t failure %+v applied %s current %s", rec.State, rec.Parked, rec.Failure, machine.ShortSha(rec.AppliedSha), machine.ShortSha(h.current()))
	}
	if w := h.explainWhy(); w == nil || !strings.Contains(w.Next, machine.ShortSha(v1)+", serves again") {
		t.Errorf("explain's why after the heal %+v", w)
	}
}
