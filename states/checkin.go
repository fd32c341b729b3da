package states

import (
	"context"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// checkin sends the heartbeat and records what tenancy answered. A refused bearer is
// handled here: the token is dropped and a fresh bootstrap grant, if any, logs in again.
func (tk *tick) checkin(ctx context.Context, containers []effects.Container) (effects.CheckinResponse, error) {
	rec := tk.eng.Record()
	req := effects.CheckinRequest{EnvID: tk.Cfg.EnvID, AgentVersion: tk.Version, AppliedSha: rec.AppliedSha, Host: tk.Host, Containers: containers}
	if req.Containers == nil {
		req.Containers = []effects.Container{}
	}
	if tk.held != nil {
		req.Why = heldWhy(tk.held, tk.eng.State(), rec)
	}
	started := tk.Now()
	var resp effects.CheckinResponse
	err := tk.withBearer(ctx, func() error {
		var err error
		resp, err = tk.Fx.Tenancy.Checkin(ctx, tk.token, req)
		return err
	})
	if err != nil {
		if !tk.isBlocked() {
			tk.noteStop(machine.NoteCheckinFailed, err, started, "")
		}
		return resp, err
	}
	now := tk.Now()
	// written with the tick's next commit: a crash loses no more than when this check-in was
	tk.eng.Defer(func(r *store.Record) {
		r.LastCheckinAt = now
		r.DesiredSha = resp.DesiredSha
		if resp.CheckinIntervalS > 0 {
			r.IntervalS = resp.CheckinIntervalS
		}
		if resp.Vault != nil && resp.Vault.Mount != "" {
			r.KVMount = resp.Vault.Mount
		}
		r.Containers, r.SeenAt = toStore(containers), timeZero
		if tk.listErr == nil && len(containers) > 0 {
			r.SeenAt = tk.listedBy
		}
	})
	// the transition or the note that follows says it (and a heartbeat's one line is its closing
	// line): one line per fact
	tk.Log.Debug().Msgf("checkin: action=%s desired=%s applied=%s", resp.Action, machine.ShortSha(resp.DesiredSha), machine.ShortSha(rec.AppliedSha))
	return resp, nil
}
