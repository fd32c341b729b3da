package states_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/states"
	"github.com/tikali/monky-deployd/store"
)

// noBao fails the test when the heartbeat build asks OpenBao anything: it has no client.
type noBao struct{ t testing.TB }

func (b noBao) Login(context.Context, string, string, string) (effects.Token, error) {
	b.t.Error("the heartbeat build logged in to OpenBao")
	return effects.Token{}, errors.New("no OpenBao")
}
func (b noBao) LookupSelf(context.Context, string) (effects.TokenInfo, error) {
	b.t.Error("the heartbeat build looked its token up")
	return effects.TokenInfo{}, errors.New("no OpenBao")
}
func (b noBao) RenewSelf(context.Context, string, time.Duration) (time.Duration, error) {
	b.t.Error("the heartbeat build renewed its token")
	return 0, errors.New("no OpenBao")
}
func (b noBao) RevokeSelf(context.Context, string) error {
	b.t.Error("the heartbeat build revoked its token")
	return errors.New("no OpenBao")
}
func (b noBao) ReadKV(context.Context, string, string, string, int) (string, error) {
	b.t.Error("the heartbeat build read a secret")
	return "", errors.New("no OpenBao")
}

// execed stands for the exec that never returns: the complete agent ran the tick.
type execed struct{ res states.Result }

// heartbeatTick runs one tick of the heartbeat build. Its HandOver does in this process what
// the exec does: the complete agent runs with what it was handed. It returns the tick's
// exit, from whichever half ended it, and the handovers made.
func (h *harness) heartbeatTick(execErr error) (exit int, handed []states.Handover) {
	h.t.Helper()
	a := h.agent()
	a.Fx.Bao = noBao{h.t}
	a.HandOver = func(ho states.Handover) error {
		handed = append(handed, ho)
		if execErr != nil {
			return execErr
		}
		c := h.agent()
		c.Handed = &ho
		panic(execed{c.Tick(context.Background())})
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				e, ok := r.(execed)
				if !ok {
					panic(r)
				}
				exit = e.res.Exit
			}
		}()
		exit = a.Tick(context.Background()).Exit
	}()
	h.clock.Advance(time.Minute)
	return exit, handed
}

func TestHeartbeatBuildBeatsAlone(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	before := h.sim.Counts(env)
	for i := 0; i < 3; i++ {
		exit, handed := h.heartbeatTick(nil)
		h.wantExit(exit, 0)
		if len(handed) != 0 {
			t.Fatalf("a converged heartbeat was handed over: %+v", handed)
		}
	}
	after := h.sim.Counts(env)
	if after.Checkins-before.Checkins != 3 || after.Reports-before.Reports != 3 {
		t.Fatalf("3 heartbeats: %d check-ins, %d reports", after.Checkins-before.Checkins, after.Reports-before.Reports)
	}
	if rec := h.record(); h.sim.Desired(env) != rec.AppliedSha || machine.State(rec.State) != machine.Reported {
		t.Fatalf("after the heartbeats: %s, applied %s", rec.State, rec.AppliedSha)
	}
}

// An apply is the complete agent's, in the same tick, on the heartbeat build's check-in.
func TestHeartbeatBuildHandsAnApplyOverWithItsCheckin(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	tickBefore := h.record().Tick
	v2 := h.release("v2", nil)
	before := h.sim.Counts(env)
	exit, handed := h.heartbeatTick(nil)
	h.wantExit(exit, 0)
	if len(handed) != 1 || handed[0].Checkin == nil || handed[0].Checkin.Action != effects.ActionApply || handed[0].Lock == nil {
		t.Fatalf("handovers: %+v", handed)
	}
	if !strings.Contains(handed[0].Why, "apply") {
		t.Errorf("why: %q", handed[0].Why)
	}
	after := h.sim.Counts(env)
	if n := after.Checkins - before.Checkins; n != 1 {
		t.Fatalf("%d check-ins for one handed-over tick, want 1", n)
	}
	rec := h.record()
	if rec.AppliedSha != v2 {
		t.Fatalf("applied %s, want %s", rec.AppliedSha, v2)
	}
	if rec.Tick != tickBefore+1 {
		t.Fatalf("the handed-over tick is tick %d, want %d: one tick, not two", rec.Tick, tickBefore+1)
	}
	h.noNote(machine.NoteHandOver)
}

// What the heartbeat build cannot start alone goes over before the check-in.
func TestHeartbeatBuildHandsOverBeforeCheckingIn(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(h *harness)
		why  string
	}{
		{"fresh box", func(h *harness) { h.release("v1", nil) }, "no history"},
		{"token due for renewal", func(h *harness) {
			h.apply("v1")
			// within renew_below_s of the token's 24h ttl, not past it
			h.clock.Advance(24*time.Hour - time.Duration(h.cfg.Bao.RenewBelow)*time.Second/2)
		}, "OpenBao"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			c.set(h)
			before := h.sim.Counts(env)
			exit, handed := h.heartbeatTick(nil)
			h.wantExit(exit, 0)
			if len(handed) != 1 || handed[0].Checkin != nil || handed[0].Lock == nil || !strings.Contains(handed[0].Why, c.why) {
				t.Fatalf("handovers: %+v", handed)
			}
			if n := h.sim.Counts(env).Checkins - before.Checkins; n != 1 {
				t.Fatalf("%d check-ins, want 1 (the complete agent's)", n)
			}
			if rec := h.record(); rec.AppliedSha != h.sim.Desired(env) {
				t.Fatalf("applied %q, want %q", rec.AppliedSha, h.sim.Desired(env))
			}
		})
	}
}

// A complete agent that cannot start is the tick's failure, journaled with its cause.
func TestHeartbeatBuildWithoutTheCompleteAgent(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	exit, handed := h.heartbeatTick(errors.New("exec /usr/bin/monky-deployd: no such file or directory"))
	h.wantExit(exit, 1)
	if len(handed) != 1 {
		t.Fatalf("handovers: %+v", handed)
	}
	if n := h.sim.Counts(env).Checkins; n != 0 {
		t.Fatalf("%d check-ins", n)
	}
	e, ok := h.entry(func(e store.Entry) bool { return strings.Contains(e.Detail, "/usr/bin/monky-deployd") })
	if !ok || !strings.Contains(e.Detail, "complete agent") {
		t.Fatalf("no journal entry names the complete agent that did not start: %+v\nlogs:\n%s", e, h.logs)
	}
}

func (h *harness) noNote(event string) {
	h.t.Helper()
	if e, ok := h.entry(func(e store.Entry) bool { return e.Event == event }); ok {
		h.t.Fatalf("unexpected %s entry: %+v", event, e)
	}
}

// A heartbeat-build tick that wrote before it found the tick was not a heartbeat (here: a lease
// recorded in the future, corrected) ends that tick with a hand-over note; the complete agent's
// tick is the next one, on the same check-in.
func TestHeartbeatBuildEndsATickItWroteBeforeHandingOver(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	tickBefore := h.record().Tick
	if err := h.st.Update(func(tx store.Tx) error {
		return tx.AddLease(store.LeaseEvent{At: h.clock.Now().Add(365 * 24 * time.Hour), Outcome: "asked"})
	}); err != nil {
		t.Fatal(err)
	}
	v2 := h.release("v2", nil)
	before := h.sim.Counts(env)
	exit, handed := h.heartbeatTick(nil)
	h.wantExit(exit, 0)
	if len(handed) != 1 || handed[0].Checkin == nil {
		t.Fatalf("handovers: %+v", handed)
	}
	if n := h.sim.Counts(env).Checkins - before.Checkins; n != 1 {
		t.Fatalf("%d check-ins, want 1", n)
	}
	rec := h.record()
	if rec.AppliedSha != v2 || rec.Tick != tickBefore+2 {
		t.Fatalf("applied %.12s in tick %d; want %.12s in tick %d (the heartbeat build's, then the complete agent's)", rec.AppliedSha, rec.Tick, v2, tickBefore+2)
	}
	var sum store.TickSummary
	if err := h.st.View(func(tx store.Tx) error {
		var err error
		sum, _, err = tx.GetTick(tickBefore + 1)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if sum.Exit == nil || *sum.Exit != 0 {
		t.Fatalf("the heartbeat build's tick has no end: %+v", sum)
	}
	e, ok := h.entry(func(e store.Entry) bool { return e.Event == machine.NoteHandOver })
	if !ok || e.Tick != tickBefore+1 || !strings.Contains(e.Detail, "apply") {
		t.Fatalf("hand-over note: %+v (found %v)", e, ok)
	}
	if _, ok := h.entry(func(e store.Entry) bool { return e.Event == machine.NoteClockCorrected && e.Tick == tickBefore+1 }); !ok {
		t.Fatal("the clock correction that wrote first is not in the heartbeat build's tick")
	}
}
