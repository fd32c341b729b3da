package states

import (
	"fmt"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
)

// RecordStartFailure journals a tick that could not start because what it dials with is
// unusable — a transport this build lacks, an identity it cannot read — so `explain` and
// `status` name the tick, its exit code and the fix. It changes no state but the tick's.
func (a *Agent) RecordStartFailure(cause error) Result {
	a.defaults()
	res := Result{Exit: ExitCode(cause), Err: cause}
	lk, held, err := lockFile(a.Cfg.LockPath())
	if err != nil || !held {
		return res
	}
	defer lk.release()
	eng, err := machine.Load(a.Store, a.Now)
	if err != nil {
		return res
	}
	started := a.Now()
	if _, err := eng.BeginTick(a.Cfg.EnvID); err != nil {
		return res
	}
	code := effects.CodeOf(cause)
	if code == "" {
		code = vocab.LocalFailure
	}
	if err := eng.Note(machine.NoteTickEnd, code, cause.Error(), started, nil); err != nil {
		a.Log.Warn().Msg(fmt.Sprintf("journal the failed start: %v", err))
	}
	_ = eng.EndTick(machine.TickEnd{Exit: res.Exit}, a.Retention)
	return res
}
