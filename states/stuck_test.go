package states_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/test/sim"
)

// TestAnOutageIsTimedFromItsFirstTick: OpenBao down for 13 minutes, a tick every 10 s and
// stuck_after_s 180 — the fault's age is read from its first tick, durably, not from the few tick
// headers kept: working on it for the first three minutes, a person after, and converged again at
// the first tick after OpenBao answers.
func TestAnOutageIsTimedFromItsFirstTick(t *testing.T) {
	testkit.Heavy(t, "make test-heavy", "78 ticks of an OpenBao outage")
	h := newHarness(t)
	h.appendConfig("stuck_after_s: 180\n")
	h.apply("v1")
	h.release("v2", nil)
	h.sim.Fail(sim.FailRule{Path: "/v1/auth/", Status: 503, Message: "Vault is sealed"})
	h.sim.Fail(sim.FailRule{Path: "/v1/monky/", Status: 503, Message: "Vault is sealed"})
	lim := explain.LimitsOf(h.cfg)
	start := h.clock.Now()
	for h.clock.Now().Sub(start) < 13*time.Minute {
		h.wantExit(h.agent().Tick(context.Background()).Exit, 75)
		h.clock.Advance(10 * time.Second)
		st, err := explain.BuildStatusWith(h.st, h.clock.Now(), nil, lim)
		if err != nil {
			t.Fatal(err)
		}
		lasted := h.clock.Now().Sub(start)
		want := explain.Working
		if lasted > 3*time.Minute+10*time.Second {
			want = explain.NeedsPerson
		}
		if lasted <= 3*time.Minute && st.Verdict != explain.Working || lasted > 3*time.Minute+10*time.Second && st.Verdict != want {
			t.Fatalf("OpenBao down %s, stuck_after_s 180: verdict %s (codes %v), want %s", lasted, st.Verdict, st.Codes, want)
		}
	}
	if rec := h.record(); rec.Temporary.Ticks != 78 || !rec.Temporary.Since.Equal(start) {
		t.Errorf("the record's run of exit 75: %+v, want 78 ticks since %s", rec.Temporary, start)
	}
	h.sim.ClearFails()
	h.wantExit(h.agent().Tick(context.Background()).Exit, 0)
	st, err := explain.BuildStatusWith(h.st, h.clock.Now(), nil, lim)
	if err != nil || st.Verdict != explain.Converged {
		t.Fatalf("the first tick after OpenBao answers: verdict %s (%v), want converged", st.Verdict, err)
	}
	if rec := h.record(); rec.Temporary.Ticks != 0 {
		t.Errorf("after a tick that ended exit 0 the run is %+v, want none", rec.Temporary)
	}
}

// TestTenancysOwnErrorIsNotASilence: tenancy answers the check-in 503 with a code of its own
// (the OpenBao it checks bearers at is down): explain says tenancy answered — not that the
// check-in got no answer — and its fix sends no one to the tunneller; past stuck_after_s the age
// it gives is the fault's own (seconds under a minute, not "0s").
func TestTenancysOwnErrorIsNotASilence(t *testing.T) {
	h := newHarness(t)
	h.appendConfig("stuck_after_s: 5\n")
	h.apply("v1")
	h.sim.Fail(sim.FailRule{Path: "/v1/agent/checkin", Status: 503, Code: "OPENBAO_UNAVAILABLE", Message: "cannot check the bearer"})
	h.wantExit(h.agent().Tick(context.Background()).Exit, 75)
	w := h.explainWhy()
	if w == nil || w.Reason != vocab.ReasonTenancy5xx || !strings.HasPrefix(w.Fault, "Tenancy answered the check-in with a server error of its own") {
		t.Fatalf("explain's why %+v; want tenancy's own error (reason tenancy-5xx)", w)
	}
	if strings.Contains(w.Fix, "ziti-edge-tunnel") || !strings.HasPrefix(w.Fix, vocab.NoCommand) {
		t.Errorf("the fix %q: the box reached tenancy, so there is no command on it", w.Fix)
	}
	h.clock.Advance(8 * time.Second)
	h.wantExit(h.agent().Tick(context.Background()).Exit, 75)
	h.clock.Advance(time.Second)
	if w := h.explainWhy(); w == nil || w.Verdict != "needs_person" || !strings.Contains(w.Next, "it has lasted 9s, past stuck_after_s (5)") {
		t.Errorf("explain's why 9 s into the fault %+v; want needs_person, lasted 9s", w)
	}
}
