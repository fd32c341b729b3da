package states_test

import (
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/budget"
	"github.com/tikali/monky-deployd/test/hostile"
)

// A release past the budget (issue 37's cost classes, at full size) is refused BUNDLE_INVALID
// naming the bound, before any lease; the tick ends normally and reports; the refusal is
// remembered for the sha, so the next tick neither fetches nor loads it again. Before the
// budget, the first of them grew the tick to 1.7 GB, and nothing was remembered.
func TestPastTheBudgetRefusedOnceAndRemembered(t *testing.T) {
	// the classes a tick is run on: one per bound (the rest are internal/bundle's)
	run := map[string]bool{"alias-400k-x2000": true, "services-46000": true, "nodes-1mib": true}
	for _, c := range hostile.Cases() {
		if !run[c.Name] {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			h := newHarness(t)
			h.release("v1", func(f map[string][]byte) { f["compose.yaml"] = c.Compose() })
			before := budget.Started()
			h.wantExit(h.tick(), 1)
			if budget.Started() == before {
				t.Fatal("the tick did not load the model in a child")
			}
			cnt := h.sim.Counts(env)
			if cnt.LeaseAsks != 0 || cnt.KVReads != 0 {
				t.Errorf("lease asks %d, kv reads %d", cnt.LeaseAsks, cnt.KVReads)
			}
			res, detail := h.lastReport()
			if res != "failed" || !strings.HasPrefix(detail, "BUNDLE_INVALID: ") || !c.Names(detail) {
				t.Errorf("report %s %q, want failed BUNDLE_INVALID: … one of %q", res, detail, c.Bound)
			}
			if rec := h.record(); rec.State != "Refused" || rec.Refusal == nil || !c.Names(rec.Refusal.Detail) {
				t.Errorf("state %s refusal %+v", rec.State, rec.Refusal)
			}
			loads, fetches := budget.Started(), cnt.BundleFetches
			h.wantExit(h.tick(), 1)
			if got := budget.Started(); got != loads {
				t.Errorf("the refused sha was loaded again (%d children → %d)", loads, got)
			}
			if got := h.sim.Counts(env).BundleFetches; got != fetches {
				t.Errorf("the refused sha was fetched again (%d → %d)", fetches, got)
			}
		})
	}
}

// A heartbeat of a converged box loads no model: it starts no loader child.
func TestHeartbeatStartsNoLoader(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.wantExit(h.tick(), 0)
	before := budget.Started()
	h.wantExit(h.tick(), 0)
	if got := budget.Started(); got != before {
		t.Errorf("a heartbeat started %d loader children", got-before)
	}
}

// A benign release whose bundle carries 60 MiB of assets applies in one tick: its model is loaded
// within the budget whatever else the bundle holds (issue 47: 16–24 MiB of files were refused for
// good as the loader's memory bound).
func TestALargeBenignBundleApplies(t *testing.T) {
	for _, c := range hostile.Cases() {
		if c.Name != "benign-60mib-assets" {
			continue
		}
		h := newHarness(t)
		h.release("v1", func(f map[string][]byte) {
			for n, data := range c.Files() {
				f[n] = data
			}
		})
		h.wantExit(h.tick(), 0)
		if rec := h.record(); rec.AppliedSha == "" || rec.Refusal != nil {
			t.Fatalf("not applied: state %s refusal %+v", rec.State, rec.Refusal)
		}
		return
	}
	t.Fatal("no benign-60mib-assets case")
}
