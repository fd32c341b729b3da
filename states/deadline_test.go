package states_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/machine/explain"
)

// stallBao's KV reads hang until the caller's context ends (an OpenBao that accepts and never
// answers, each read inside its own timeout).
type stallBao struct{ effects.Bao }

func (stallBao) ReadKV(ctx context.Context, token, path, key string, version int) (string, error) {
	<-ctx.Done()
	return "", &effects.Error{Op: "bao read", Kind: effects.Temporary, Err: ctx.Err()}
}

// A tick is bounded as a whole: past tick_timeout_s it stops at the next step boundary, keeps
// what it committed, journals TICK_DEADLINE and exits 75; the apply is not counted as failed and
// the next tick resumes and converges. Nothing bounded a tick before.
func TestTickDeadlineStopsAtAStepBoundary(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	a := h.agent()
	a.Fx.Bao = stallBao{a.Fx.Bao}
	// long enough that only the stalled read meets it on a loaded machine; where the deadline
	// lands first elsewhere (the login after the lease), the tick stops at that boundary instead
	a.TickTimeout = 2 * time.Second
	done := make(chan int, 1)
	go func() { done <- a.Tick(context.Background()).Exit }()
	var exit int
	select {
	case exit = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the tick did not end at its deadline")
	}
	h.wantExit(exit, 75)
	rec := h.record()
	if (rec.State != "LoggedIn" && rec.State != "Leased") || rec.Failure != nil || rec.TotalAttempts() != 0 {
		t.Fatalf("state %s failure %+v attempts %v", rec.State, rec.Failure, rec.Attempts)
	}
	doc, err := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tk := range doc.Ticks {
		for _, tr := range tk.Transitions {
			if tr.Code == "TICK_DEADLINE" && strings.Contains(tr.Detail, "tick_timeout_s") {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("explain shows no TICK_DEADLINE: %+v", doc.Ticks)
	}
	h.wantConverged("next tick")
}
