package states

import (
	"context"
	"fmt"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// retire is action down: compose down (volumes only when asked and never on prod), report down.
func (a *Agent) retire(ctx context.Context, resp effects.CheckinResponse) error {
	rec := a.eng.Record()
	st := a.eng.State()
	if st == machine.Down {
		// the down is done; its report waits in the outbox (sent above, or next tick)
		return nil
	}
	if rec.Action == effects.ActionDown && (st == machine.Reported || st == machine.Idle) {
		return a.eng.Note(machine.NoteCheckin, "", "action=down: retired; nothing runs", a.Now(), nil)
	}
	volumes := resp.PurgeVolumes || a.Cfg.VolumesOnAbsent == "purge"
	detail := checkinDetail(resp, rec.AppliedSha) + fmt.Sprintf(" purge_volumes=%t", resp.PurgeVolumes)
	if err := a.startFlight(resp, "", detail); err != nil {
		return err
	}
	started := a.Now()
	a.stepStarted = started
	note := "compose down --remove-orphans"
	if volumes && a.Cfg.IsProd() {
		volumes = false
		note += "; volumes kept: prod never purges"
	} else if volumes {
		note += " -v (volumes purged)"
	}
	if err := a.Fx.Compose.Down(ctx, a.currentDir(), volumes); err != nil {
		if effects.IsTemporary(err) {
			return err
		}
		return a.fail(ctx, machine.CheckedIn, effects.CodeOf(err), "compose down: "+err.Error(), false)
	}
	_ = removeCurrent(a.fs(), a.currentDir())
	rep := effects.Report{Sha: rec.AppliedSha, Result: effects.ResultDown, Detail: note}
	if err := a.eng.Fire(machine.Outcome{Event: machine.EvDown, Detail: note, Update: func(r *store.Record, tx store.Tx) error {
		r.AppliedSha = ""
		r.Containers = nil
		r.RetiredAt = a.Now()
		return a.enqueue(r, tx, machine.Down, rep)
	}}, started); err != nil {
		return err
	}
	return a.flushOutbox(ctx)
}
