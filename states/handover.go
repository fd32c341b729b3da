package states

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/machine"
)

// The heartbeat build (cmd/monky-deployd built with -tags heartbeat; docs/PERFORMANCE.md) is
// the agent without OpenBao's client and without compose's loader, which are a quarter of the
// binary and most of its start. It runs the tick a converged box runs every minute — check in,
// `compose ps`, report — and hands any other tick to the complete agent with the tick lock
// still held and, once it has checked in, tenancy's answer: the complete agent goes on where
// it stopped, in the same tick, with no second check-in. Nothing of the tick is written before
// it hands over, unless a local step of its own wrote (a clock correction, a leftover temp
// file settled): then it ends its tick first and the complete agent's is the next one.

// A Handover is what the heartbeat build gives the complete agent.
type Handover struct {
	// Version is the heartbeat build's; a complete agent of another version ignores the rest.
	Version string `json:"version"`
	// Why is why the heartbeat build did not run the tick alone.
	Why string `json:"why"`
	// Checkin is tenancy's answer when the heartbeat build checked in, and Containers what that
	// check-in reported; nil when it handed over before checking in.
	Checkin    *effects.CheckinResponse `json:"checkin,omitempty"`
	Containers []effects.Container      `json:"containers,omitempty"`
	// Lock is the tick lock, held; it crosses the exec as an open file.
	Lock *os.File `json:"-"`
}

// handOverError ends a tick of the heartbeat build: the complete agent runs the rest.
type handOverError struct{ h Handover }

func (e *handOverError) Error() string { return "handed to the complete agent: " + e.h.Why }

func handOver(why string) error { return &handOverError{Handover{Why: why}} }

// alone says why the heartbeat build cannot run this tick by itself ("" when it can): only a
// box at rest, unblocked, with a history and nothing in its outbox goes on in the heartbeat
// build. Its token is the next check (run: tokenAtHand), after the tick's local steps.
func (tk *tick) alone(fresh bool) string {
	switch s := tk.eng.State(); {
	case fresh:
		return "a state file with no history (a new box, or one to take over)"
	case s == machine.Blocked:
		return "the box is blocked"
	case !s.Rest():
		return fmt.Sprintf("a flight is in progress (%s)", s)
	case !tk.outboxEmpty:
		return "reports wait in the outbox"
	}
	return ""
}

// heldLock is the tick lock the heartbeat build passed across its exec, or nil.
func (a *Agent) heldLock() *os.File {
	if a.Handed == nil {
		return nil
	}
	return a.Handed.Lock
}

// handed is the heartbeat build's check-in for this tick, used once; ok is false when there is
// none (this process checks in itself).
func (a *Agent) handed() (resp effects.CheckinResponse, cs []effects.Container, ok bool) {
	h := a.Handed
	a.Handed = nil
	if h == nil || h.Checkin == nil {
		return resp, nil, false
	}
	cs = h.Containers
	if cs == nil {
		cs = []effects.Container{}
	}
	return *h.Checkin, cs, true
}

// finishHandOver ends the heartbeat build's part of the tick: the tick's end is written only
// when the tick wrote something already, then the complete agent takes over (HandOver returns
// only when it could not start). A failed handover is the tick's failure.
func (tk *tick) finishHandOver(h Handover, lk *tickLock, n uint64, began time.Time) Result {
	eng := tk.eng
	if eng.Written() {
		_ = eng.Note(machine.NoteHandOver, "", h.Why, tk.Now(), nil)
		if err := eng.EndTick(machine.TickEnd{Exit: ExitOK, Action: tk.action}, tk.Retention); err != nil {
			tk.Log.Error().Err(err).Msg("end tick")
		}
	}
	h.Version, h.Lock = tk.Version, lk.f
	tk.Log.Debug().Msg("handing the tick to the complete agent: " + h.Why)
	err := fmt.Errorf("hand the tick to the complete agent (%s): %w", h.Why, tk.HandOver(h))
	res := Result{Exit: ExitFail, Err: err, IntervalS: eng.Record().IntervalS, Tick: n}
	tk.journalEnd(err)
	if err := eng.EndTick(machine.TickEnd{Exit: res.Exit, Action: tk.action}, tk.Retention); err != nil {
		tk.Log.Error().Err(err).Msg("end tick")
	}
	tk.logEnd(res, tk.Now().Sub(began))
	return res
}

// tickLock is the tick lock, held.
type tickLock struct{ f *os.File }

func (l *tickLock) release() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}
