package states_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
)

// TestAHeldBoxWaitsThenApplies: a held box checks in and reports with why HELD (the reason, who,
// until when), does not apply a new desire, heartbeats the release it runs, reads working with
// HELD; when the hold's time passes the journal says so and the next tick applies.
func TestAHeldBoxWaitsThenApplies(t *testing.T) {
	h := newHarness(t)
	v1 := h.apply("v1")
	a := h.agent()
	a.Operator = "uid 1000 (alice)"
	if _, err := a.Hold(h.clock.Now().Add(2*time.Hour), "migration by hand"); err != nil {
		t.Fatal(err)
	}
	v2 := h.release("v2", nil)
	ups := countUps(h.composeCalls())
	for i := 0; i < 3; i++ {
		h.wantExit(h.tick(), 0)
	}
	if n := countUps(h.composeCalls()); n != ups {
		t.Fatalf("compose up ran %d times while held, want none", n-ups)
	}
	if rec := h.record(); rec.AppliedSha != v1 || rec.DesiredSha != v2 {
		t.Fatalf("held: applied %s desired %s, want v1 applied and v2 desired", rec.AppliedSha, rec.DesiredSha)
	}
	if c := h.sim.Counts(env); c.Leases != 1 {
		t.Errorf("leases %d while held, want only v1's", c.Leases)
	}
	if held := h.notes(machine.NoteHeld); len(held) != 1 || !strings.Contains(held[0].Detail, machine.ShortSha(v2)) || !strings.Contains(held[0].Detail, "migration by hand") {
		t.Errorf("held notes %+v: want one, naming v2 and the reason", held)
	}
	ci, _ := h.sim.LastCheckin(env)
	if ci.Why == nil || ci.Why.Code != string(vocab.Held) || !strings.Contains(ci.Why.Evidence, "alice") || !strings.Contains(ci.Why.Evidence, "migration by hand") {
		t.Errorf("the held box's check-in why: %+v", ci.Why)
	}
	reps := h.sim.Reports(env)
	last := reps[len(reps)-1]
	if last.Result != effects.ResultApplied || last.Sha != v1 || last.Why == nil || last.Why.Code != string(vocab.Held) || !strings.Contains(last.Why.Next, "waits") {
		t.Errorf("the held box's report: %s %s why %+v; want applied v1 with why HELD", last.Result, last.Sha, last.Why)
	}
	for _, r := range h.sim.Fleet(true) {
		if r.Env == env && (r.Code != string(vocab.Held) || r.Verdict != effects.VerdictWorking) {
			t.Errorf("the fleet view of the held box: %s %s, want working HELD", r.Verdict, r.Code)
		}
	}
	st, err := explain.BuildStatusWith(h.st, h.clock.Now(), nil, explain.LimitsOf(h.cfg))
	if err != nil || st.Verdict != explain.Working || len(st.Codes) != 1 || st.Codes[0] != string(vocab.Held) || st.Hold == nil || st.Hold.Reason != "migration by hand" {
		t.Fatalf("held status: %s %v hold %+v (%v); want working HELD with the hold", st.Verdict, st.Codes, st.Hold, err)
	}
	var text strings.Builder
	explain.WriteStatusText(&text, st)
	if !strings.Contains(text.String(), "held") || !strings.Contains(text.String(), "hold --release") {
		t.Errorf("status text does not show the hold:\n%s", text.String())
	}

	h.clock.Advance(2 * time.Hour)
	h.wantExit(h.tick(), 0)
	if ended := h.notes(machine.NoteHoldEnded); len(ended) != 1 || !strings.Contains(ended[0].Detail, "alice") {
		t.Errorf("hold-ended notes %+v", ended)
	}
	if rec := h.record(); rec.AppliedSha != v2 || rec.Hold != nil {
		t.Fatalf("after the hold: applied %s hold %+v, want v2 applied and no hold", rec.AppliedSha, rec.Hold)
	}
}

// TestAHeldBoxIsNotHealed: a service killed while the box is held is reported, not healed; the
// report says the hold kept it.
func TestAHeldBoxIsNotHealed(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	if _, err := h.agent().Hold(h.clock.Now().Add(time.Hour), "looking at api by hand"); err != nil {
		t.Fatal(err)
	}
	ups := countUps(h.composeCalls())
	h.dockerKnob("killed", "api\n")
	h.wantExit(h.tick(), 1)
	if n := countUps(h.composeCalls()); n != ups {
		t.Fatalf("compose up ran %d times while held, want none", n-ups)
	}
	if heals := h.notes(machine.NoteHeal); len(heals) != 0 {
		t.Errorf("heal notes while held: %+v", heals)
	}
	h.wantReport("failed", vocab.Unhealthy, "not healed: held by ")
}

// TestHoldAndReleaseSayWhatTheyDid: a hold needs a reason and ends within 7 days; a release ends
// it at once and is journaled as a tick of its own; releasing no hold changes nothing.
func TestHoldAndReleaseSayWhatTheyDid(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	a := h.agent()
	now := h.clock.Now()
	for _, c := range []struct {
		until  time.Time
		reason string
		want   string
	}{
		{now.Add(time.Hour), "  ", "needs a reason"},
		{now.Add(8 * 24 * time.Hour), "x", "at most 7 days"},
		{now.Add(-time.Minute), "x", "not after now"},
		{now.Add(time.Hour), strings.Repeat("r", 201), "at most 200"},
	} {
		if _, err := a.Hold(c.until, c.reason); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Hold(%s, %q): %v, want %q", c.until, c.reason, err, c.want)
		}
	}
	if h.record().Hold != nil {
		t.Fatal("a refused hold was recorded")
	}
	if words, err := a.ReleaseHold(); err != nil || !strings.Contains(words, "not held") {
		t.Errorf("release with no hold: %q %v", words, err)
	}
	before := h.record().Tick
	if _, err := a.Hold(now.Add(time.Hour), "night freeze\x1b[31m"); err != nil {
		t.Fatal(err)
	}
	if rec := h.record(); rec.Hold == nil || strings.ContainsRune(rec.Hold.Reason, 0x1b) || rec.Tick != before+1 {
		t.Fatalf("the hold %+v at tick %d (before %d): want a sanitized reason, journaled as a tick of its own", rec.Hold, rec.Tick, before)
	}
	words, err := a.ReleaseHold()
	if err != nil || !strings.Contains(words, "hold released by") || !strings.Contains(words, "night freeze") {
		t.Fatalf("release: %q %v", words, err)
	}
	if rec := h.record(); rec.Hold != nil {
		t.Fatalf("released, the record still holds %+v", rec.Hold)
	}
	if holds := h.notes(machine.NoteHold); len(holds) != 2 || !strings.Contains(holds[1].Detail, "hold released by") {
		t.Errorf("hold notes %+v: want the hold and its release", holds)
	}
}

// TestAHeldBoxKeepsItsRememberedVerdict: a hold does not turn a refused or parked desired sha
// green. Held, a tick ends as the unheld one does (exit 1 under the refusal's or failure's own
// code), runs no recheck, retry or fetch, and the check-in's HELD why says needs_person and that
// the sha stays where it is.
func TestAHeldBoxKeepsItsRememberedVerdict(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(h *harness) (sha string)
		code  vocab.Code
		next  string
	}{
		{"refused", func(h *harness) string {
			h.apply("v1")
			v2 := h.release("v2", func(f map[string][]byte) { f["compose.yaml"] = append(f["compose.yaml"], "    privileged: true\n"...) })
			h.wantExit(h.tick(), 1)
			return v2
		}, "PRIVILEGED_REFUSED", "stays refused (PRIVILEGED_REFUSED) through the hold"},
		{"parked", func(h *harness) string {
			v1 := h.release("v1", nil)
			h.dockerKnob("pull-error", "Error response from daemon: manifest for harbor.example/monky/api:v1 not found: manifest unknown")
			h.failedTicks(5, 16*time.Minute)
			return v1
		}, "COMPOSE_PULL_FAILED", "stays parked (COMPOSE_PULL_FAILED) when the hold ends"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			sha := tc.setup(h)
			if _, err := h.agent().Hold(h.clock.Now().Add(time.Hour), "looking at it"); err != nil {
				t.Fatal(err)
			}
			before := h.sim.Counts(env)
			for i := 0; i < 2; i++ {
				res := h.agent().Tick(context.Background())
				h.clock.Advance(time.Minute)
				var e *effects.Error
				if res.Exit != 1 || !errors.As(res.Err, &e) || e.Code != tc.code {
					t.Fatalf("held tick %d: exit %d (%v); want 1 %s as unheld", i, res.Exit, res.Err, tc.code)
				}
			}
			if c := h.sim.Counts(env); c.BundleFetches != before.BundleFetches || c.Leases != before.Leases {
				t.Errorf("a held tick fetched or leased: %+v → %+v", before, c)
			}
			ci, _ := h.sim.LastCheckin(env)
			if ci.Why == nil || ci.Why.Code != string(vocab.Held) || ci.Why.Verdict != effects.VerdictNeedsPerson || !strings.Contains(ci.Why.Next, machine.ShortSha(sha)+" "+tc.next) {
				t.Errorf("the held check-in's why %+v; want HELD, needs_person, %q", ci.Why, tc.next)
			}
			st, err := explain.BuildStatusWith(h.st, h.clock.Now(), nil, explain.LimitsOf(h.cfg))
			if err != nil || st.Verdict != explain.NeedsPerson || st.Hold == nil {
				t.Fatalf("held status: %s %v hold %+v (%v); want needs_person with the hold", st.Verdict, st.Codes, st.Hold, err)
			}
			for _, w := range append(st.Also, *st.Why) {
				if w.Code == vocab.Held && !strings.Contains(w.Next, machine.ShortSha(sha)+" "+tc.next) {
					t.Errorf("status's HELD why %+v; want %q", w, tc.next)
				}
			}
		})
	}
}

// A held tick whose desired sha is parked names the box's own resume command, as the unheld
// tick does: its user and its --config.
func TestAHeldParkedTickNamesTheBoxsResume(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.dockerKnob("pull-error", "Error response from daemon: manifest for harbor.example/monky/api:v1 not found: manifest unknown")
	h.failedTicks(5, 16*time.Minute)
	if _, err := h.agent().Hold(h.clock.Now().Add(time.Hour), "looking at it"); err != nil {
		t.Fatal(err)
	}
	res := h.agent().Tick(context.Background())
	want := "parked until a new desired sha or `sudo -u monky-deployd monky-deployd --config " + h.cfg.Path + " resume`"
	if res.Err == nil || !strings.Contains(res.Err.Error(), want) {
		t.Errorf("held parked tick: %v; want %q", res.Err, want)
	}
}
