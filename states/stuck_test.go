package states_test

import (
	"context"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/testkit"
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
