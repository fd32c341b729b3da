package states_test

import (
	"testing"

	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/test/sim"
)

// Only quiet heartbeats fold (docs/JOURNAL.md, "Retention and folding"): a run of ticks that
// ended exit 75 (tenancy unreachable) or exit 1 (blocked) keeps every tick as its own, while
// the quiet heartbeats after the apply still fold into one.
func TestOnlyQuietTicksFold(t *testing.T) {
	for _, c := range []struct {
		name string
		exit int
		make func(h *harness)
	}{
		{"exit 75", 75, func(h *harness) {
			h.sim.Fail(sim.FailRule{Path: "/v1/agent/checkin", Status: 503, Message: "back soon"})
		}},
		{"exit 1", 1, func(h *harness) {
			if _, err := h.sim.RevealKit(env); err != nil {
				h.t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply("v1")
			h.wantExit(h.tick(), 0)
			h.wantExit(h.tick(), 0) // folds into the one before
			c.make(h)
			for i := 0; i < 4; i++ {
				h.wantExit(h.tick(), c.exit)
			}
			doc, err := explain.Build(h.st, explain.Options{N: 100, Now: h.clock.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if len(doc.Ticks) != 6 {
				t.Fatalf("%d ticks kept, want 6 (the apply, one heartbeat folding another, four ticks that ended exit %d)", len(doc.Ticks), c.exit)
			}
			if doc.Ticks[1].Folded != 1 {
				t.Errorf("the quiet heartbeats: folded %d, want 1", doc.Ticks[1].Folded)
			}
			for _, tk := range doc.Ticks[2:] {
				if tk.Folded != 0 || tk.Exit == nil || *tk.Exit != c.exit {
					t.Errorf("tick %d: exit %v folded %d", tk.Tick, tk.Exit, tk.Folded)
				}
			}
		})
	}
}
