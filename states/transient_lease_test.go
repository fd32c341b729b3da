package states_test

import (
	"testing"

	"github.com/tikali/monky-deployd/test/sim"
)

// A lookup-self that fails for a temporary reason says nothing about the lease-derived token:
// the apply must not spend a lease on it (the chaos soak found the budget drained by 503s on
// lookup-self). The tick ends temporary and the next one reuses the token.
func TestTransientLookupCostsNoLease(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	h.release("v2", nil)
	before := h.sim.Counts(env)
	h.sim.Fail(sim.FailRule{Path: "/v1/auth/token/lookup-self", Status: 503, Times: 1})
	h.wantExit(h.tick(), 75)
	h.wantExit(h.tick(), 0)
	after := h.sim.Counts(env)
	if after.LeaseAsks != before.LeaseAsks {
		t.Errorf("lease asks %d → %d: a 503 on lookup-self cost a lease", before.LeaseAsks, after.LeaseAsks)
	}
	if rec := h.record(); rec.State != "Reported" {
		t.Errorf("state %s, want Reported", rec.State)
	}
}
