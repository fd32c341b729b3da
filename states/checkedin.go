package states

import (
	"context"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// checkin sends the heartbeat and records what tenancy answered. A refused bearer is
// handled here: the token is dropped and a fresh bootstrap grant, if any, logs in again.
func (a *Agent) checkin(ctx context.Context, containers []effects.Container) (effects.CheckinResponse, error) {
	rec := a.eng.Record()
	req := effects.CheckinRequest{EnvID: a.Cfg.EnvID, AgentVersion: a.Version, AppliedSha: rec.AppliedSha, Host: a.Host, Containers: containers}
	if req.Containers == nil {
		req.Containers = []effects.Container{}
	}
	started := a.Now()
	var resp effects.CheckinResponse
	err := a.withBearer(ctx, func() error {
		var err error
		resp, err = a.Fx.Tenancy.Checkin(ctx, a.token, req)
		return err
	})
	if err != nil {
		if !a.isBlocked() {
			_ = a.eng.Note(machine.NoteCheckinFailed, effects.CodeOf(err), redact.String(err.Error()), started, nil)
		}
		return resp, err
	}
	now := a.Now()
	// written with the tick's next commit: a crash loses no more than when this check-in was
	a.eng.Defer(func(r *store.Record) {
		r.LastCheckinAt = now
		r.DesiredSha = resp.DesiredSha
		if resp.CheckinIntervalS > 0 {
			r.IntervalS = resp.CheckinIntervalS
		}
		if resp.Vault != nil && resp.Vault.Mount != "" {
			r.KVMount = resp.Vault.Mount
		}
		r.Containers = toStore(containers)
	})
	ev := a.Log.Info()
	if resp.Action == effects.ActionNone {
		ev = a.Log.Debug() // a heartbeat's one line is its closing line
	}
	ev.Msgf("checkin: action=%s desired=%s applied=%s", resp.Action, short(resp.DesiredSha), short(rec.AppliedSha))
	return resp, nil
}
