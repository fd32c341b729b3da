package states_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/store"
)

// engineOnly is a store that only the machine's Engine may write.
type engineOnly struct {
	store.Store
	t       testing.TB
	updates int
}

func (s *engineOnly) Update(fn func(store.Tx) error) error {
	pc := make([]uintptr, 1)
	runtime.Callers(2, pc) // the caller of Update
	f, _ := runtime.CallersFrames(pc).Next()
	if !strings.HasPrefix(f.Function, "github.com/tikali/monky-deployd/machine.") {
		s.t.Errorf("the store was written by %s, not by the Engine", f.Function)
	}
	s.updates++
	return s.Store.Update(fn)
}

// TestTheEngineIsTheOnlyWriter runs an apply whose report tenancy does not acknowledge for
// two ticks, then does: every write of the state file (the outbox's included) is the Engine's.
func TestTheEngineIsTheOnlyWriter(t *testing.T) {
	h := newHarness(t)
	st := &engineOnly{Store: h.st, t: t}
	tick := func() int {
		a := h.agent()
		a.Store = st
		res := a.Tick(context.Background())
		h.clock.Advance(time.Minute)
		return res.Exit
	}
	h.release("v1", nil)
	h.sim.Fail(simFail("/v1/agent/report", 503, "", ""))
	h.wantExit(tick(), 75)
	h.wantExit(tick(), 75)
	var attempts int
	if err := h.st.View(func(tx store.Tx) error {
		q, err := tx.Outbox()
		for _, r := range q {
			t.Logf("queued %d %s %s: %d attempts", r.ID, r.Meta.State, r.Meta.Result, r.Attempts)
		}
		if len(q) > 0 {
			attempts = q[0].Attempts
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if attempts < 2 {
		t.Fatalf("the queued report counts %d failed sends after two ticks", attempts)
	}
	h.sim.ClearFails()
	h.wantExit(tick(), 0)
	if rec := h.record(); rec.State != "Reported" || !rec.LastReport.Acknowledged {
		t.Fatalf("state %s, last report %+v", rec.State, rec.LastReport)
	}
	if st.updates == 0 {
		t.Fatal("no write seen")
	}
	t.Logf("%d writes, %d failed sends counted", st.updates, attempts)
}
