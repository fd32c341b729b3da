package states

import (
	"context"
	"fmt"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// retire is action down: compose down (volumes only when asked and never on prod), report down.
func (tk *tick) retire(ctx context.Context, resp effects.CheckinResponse) error {
	rec := tk.eng.Record()
	st := tk.eng.State()
	if st == machine.Down {
		// the down is done; its report waits in the outbox (sent above, or next tick)
		return nil
	}
	if rec.Action == vocab.ActionDown && (st == machine.Reported || st == machine.Idle) {
		return tk.eng.Note(machine.NoteCheckin, "", "", "action=down: retired; nothing runs", tk.Now(), nil)
	}
	volumes := resp.PurgeVolumes || tk.Cfg.VolumesOnAbsent == "purge"
	detail := checkinDetail(resp, rec.AppliedSha) + fmt.Sprintf(" purge_volumes=%t", resp.PurgeVolumes)
	if err := tk.startFlight(resp, "", detail); err != nil {
		return err
	}
	started := tk.Now()
	tk.stepStarted = started
	note := "compose down --remove-orphans"
	if volumes && tk.Cfg.IsProd() {
		volumes = false
		note += "; volumes kept: prod never purges"
	} else if volumes {
		// say what asked for it: tenancy's purge_volumes, or this box's config
		asked := "tenancy's purge_volumes"
		if !resp.PurgeVolumes {
			asked = "volumes_on_absent: purge in " + tk.Cfg.Path
		}
		note += " -v (volumes purged, asked by " + asked + ")"
	}
	if err := tk.Fx.Compose.Down(ctx, tk.currentDir(), volumes); err != nil {
		if effects.IsTemporary(err) {
			return err
		}
		return tk.failBecause(ctx, machine.CheckedIn, effects.CodeOf(err), effects.ReasonOf(err), "compose down: "+err.Error(), false)
	}
	_ = removeCurrent(tk.fs(), tk.currentDir())
	rep := effects.Report{Sha: rec.AppliedSha, Result: effects.ResultDown, Detail: note}
	if err := tk.eng.Fire(machine.Outcome{Event: machine.EvDown, Detail: note, Update: func(r *store.Record, tx store.Tx) error {
		r.AppliedSha = ""
		r.Containers = nil
		r.RetiredAt = tk.Now()
		return tk.enqueue(r, tx, machine.Down, rep)
	}}, started); err != nil {
		return err
	}
	return tk.flushOutbox(ctx)
}
