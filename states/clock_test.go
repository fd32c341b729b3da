package states_test

import (
	"testing"
	"time"

	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// A box booted with its clock a year ahead leased (and was told to wait), then NTP stepped the
// clock back. The budget entries, the Retry-After and the token's expiry recorded a year ahead
// used to wedge the box for that year; now they are taken as now: the budget frees within an
// hour of the correction.
func TestClockSteppedBackFreesTheBudgetWithinAnHour(t *testing.T) {
	h := newHarness(t)
	h.wantExit(h.tick(), 0) // logged in; nothing desired
	ahead := h.clock.Now().Add(365 * 24 * time.Hour)
	if err := h.st.Update(func(tx store.Tx) error {
		for i := 0; i < 5; i++ {
			if err := tx.AddLease(store.LeaseEvent{At: ahead.Add(time.Duration(i) * time.Minute), Outcome: "asked"}); err != nil {
				return err
			}
		}
		rec, err := tx.Record()
		if err != nil {
			return err
		}
		rec.LeaseRetryAfter = ahead.Add(10 * time.Minute)
		rec.Token.ExpiresAt = ahead.Add(24 * time.Hour)
		return tx.PutRecord(rec)
	}); err != nil {
		t.Fatal(err)
	}
	corrected := h.clock.Now()
	budget := func() int {
		var used int
		if err := h.st.View(func(tx store.Tx) error {
			var err error
			used, _, err = machine.LeaseBudget(tx, h.clock.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return used
	}
	h.wantExit(h.tick(), 0)
	rec := h.record()
	if rec.LeaseRetryAfter.After(h.clock.Now()) || rec.Token.ExpiresAt.After(corrected.Add(31*24*time.Hour)) {
		t.Errorf("retry-after %s, token expiry %s: still a year ahead", rec.LeaseRetryAfter, rec.Token.ExpiresAt)
	}
	for h.clock.Now().Before(corrected.Add(time.Hour + 2*time.Minute)) {
		h.wantExit(h.tick(), 0)
	}
	if used := budget(); used != 0 {
		t.Errorf("an hour after the correction the budget still counts %d leases", used)
	}
	// and an apply leases again
	h.apply("v1")
	if rec := h.record(); rec.State != "Reported" || rec.Token.Source != "lease" {
		t.Errorf("state %s token source %q", rec.State, rec.Token.Source)
	}
}

// A failed apply's backoff recorded a year ahead is taken as now: the retry happens.
func TestClockSteppedBackDoesNotPostponeTheRetry(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.sim.Fail(simFail("/v1/agent/bundle/", 400, "BAD", ""))
	h.wantExit(h.tick(), 1)
	if rec := h.record(); rec.State != "Failed" {
		t.Fatalf("state %s", rec.State)
	}
	h.sim.ClearFails()
	if err := h.st.Update(func(tx store.Tx) error {
		rec, err := tx.Record()
		if err != nil {
			return err
		}
		rec.NextRetryAt = h.clock.Now().Add(365 * 24 * time.Hour)
		return tx.PutRecord(rec)
	}); err != nil {
		t.Fatal(err)
	}
	h.wantConverged("the retry waited for the clock")
}
