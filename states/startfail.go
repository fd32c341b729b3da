package states

import (
	"fmt"

	"github.com/rs/zerolog"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/logging"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
)

// RecordStartFailure journals a tick that could not start because what it dials with is
// unusable — a transport this build lacks, an identity it cannot read, docker's socket that
// refuses the agent's user — so `explain` and `status` name the tick, its exit code and the
// fix, and writes its closing line. It changes no state but the tick's.
func (a *Agent) RecordStartFailure(cause error) Result {
	a.defaults()
	log := a.Log
	code := effects.CodeOf(cause)
	if code == "" {
		code = vocab.LocalFailure
	}
	defer func() { EndEarly(log, code, cause) }()
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
	n, err := eng.BeginTick(a.Cfg.EnvID)
	if err != nil {
		return res
	}
	log = a.Log.With().Uint64(logging.FieldTick, n).Logger()
	res.Tick = n
	reason, subject := endCause(cause)
	if err := eng.NoteAbout(machine.NoteTickEnd, code, reason, subject, cause.Error(), started, nil); err != nil {
		log.Warn().Msg(fmt.Sprintf("journal the failed start: %v", err))
	}
	_ = eng.EndTick(machine.TickEnd{Exit: res.Exit}, a.Retention)
	return res
}

// EndEarly writes the closing line of a run that ended before its tick began or could go on
// (the config, the state file's lock, trust, its open, what it dials with): `exit N: words`
// with the fields a tick's closing line carries (exit, code; env_id and tick from log's
// context), at warning for exit 75 and error otherwise. code "" is the error's own.
func EndEarly(log zerolog.Logger, code vocab.Code, err error) Result {
	exit := ExitCode(err)
	if code == "" {
		code, _ = endWords(err)
	}
	if code == "" {
		code = vocab.LocalFailure
	}
	level := zerolog.ErrorLevel
	if exit == vocab.ExitTemporary {
		level = zerolog.WarnLevel
	}
	log.WithLevel(level).Int(logging.FieldExit, exit).Str(logging.FieldCode, string(code)).Msg(fmt.Sprintf("exit %d: %v", exit, err))
	return Result{Exit: exit, Err: err}
}
