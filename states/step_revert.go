package states

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// revertTarget is the release a failure of this flight from the step of from may revert to
// (AGENT.md, amendments of 2026-12-04: "The last good release keeps serving"): the release last
// healthy on this box, when the staged bundle consents (agent.revert_on_failure), the failure is
// its compose up or its health gate, and that release's directory is still kept. When the
// bundle consents but there is nothing to revert to, why says so for the failure's words.
func (tk *tick) revertTarget(from machine.State, code vocab.Code) (to, why string) {
	rec := tk.eng.Record()
	if !rec.RevertOnFailure || (from != machine.Pulled && from != machine.Up) || code == vocab.StateUnwritable {
		return "", ""
	}
	switch {
	case rec.AppliedSha == "":
		return "", "not reverted: no release was ever healthy on this box"
	case rec.AppliedSha == rec.Sha:
		return "", "not reverted: the release last healthy here is this one"
	case tk.held != nil:
		// a guard: a held box starts no flight and a hold is placed only between ticks, so no
		// apply reaches its up or gate while held
		return "", "not reverted: held by " + tk.held.By
	case !tk.exists(filepath.Join(tk.Cfg.DeployDir, "releases", rec.AppliedSha)):
		return "", fmt.Sprintf("not reverted: releases/%s, last healthy here, is no longer kept", machine.ShortSha(rec.AppliedSha))
	}
	return rec.AppliedSha, ""
}

// startRevert commits a failure of this flight that brings back the release to: the attempt
// is counted and the failure kept, as fail does, and the machine moves to Reverting, whose step
// (stepRevert) runs next in the same tick. The failed release's logs are read now, before its
// containers are replaced, for the report the revert sends.
func (tk *tick) startRevert(ctx context.Context, from machine.State, code vocab.Code, reason vocab.Reason, detail string, withLogs bool, to string) error {
	started := tk.stepStart()
	if withLogs {
		tk.revertLogs = tk.logTail(ctx)
	}
	now := tk.Now()
	words := fmt.Sprintf("%s; the bundle consents (agent.revert_on_failure): bringing back %s, the release last healthy here", detail, machine.ShortSha(to))
	return tk.eng.Fire(machine.Outcome{Event: machine.EvRevert, Code: code, Reason: reason, Detail: words, Update: func(r *store.Record, _ store.Tx) error {
		if r.Attempts == nil {
			r.Attempts = map[string]int{}
		}
		r.Attempts[string(from)]++
		r.Failure = &store.Failure{Sha: r.Sha, Code: code, Reason: reason, Detail: sanitize.Line(detail), State: string(from), At: now, Limit: tk.MaxAttempts, RevertTo: to}
		r.NextRetryAt, r.Parked = timeZero, false
		return nil
	}}, started)
}

// stepRevert: Reverting → Failed. Point `current` back at the release last healthy here, run
// compose up -d of its resolved model and .env as they were applied (no lease, no OpenBao read,
// no pull: its images are kept), and wait the health gate. Served again, the failed sha is
// reported failed with reverted_to and remembered (parked) until tenancy desires another sha or
// a person resumes; if that release fails too, the box stops reverting and says so.
//
// Idempotent: a tick resumed here points `current` and runs compose up again.
func (tk *tick) stepRevert(ctx context.Context) error {
	started := tk.Now()
	rec := tk.eng.Record()
	f := rec.Failure
	if f == nil || f.RevertTo == "" {
		return tk.revertFailed(ctx, "the record names no release to revert to")
	}
	to := f.RevertTo
	if !tk.currentResolvesTo(filepath.Join(tk.Cfg.DeployDir, "releases", to)) {
		if err := tk.swapCurrent(to); err != nil {
			return tk.revertFailed(ctx, "point current at releases/"+machine.ShortSha(to)+": "+sanitize.Line(err.Error()))
		}
	}
	if err := tk.Fx.Compose.Up(ctx, tk.currentDir()); err != nil {
		if effects.IsTemporary(err) {
			return err
		}
		return tk.revertFailed(ctx, "compose up: "+sanitize.Line(err.Error()))
	}
	if err := tk.gate(ctx, tk.Now()); err != nil {
		var unwell *notServing
		if errors.As(err, &unwell) {
			return tk.revertFailed(ctx, unwell.detail)
		}
		return err
	}
	cs, served := tk.gated, tk.gatedWords
	rep := effects.Report{Sha: rec.Sha, Result: effects.ResultFailed, Code: f.Code, RevertedTo: to, LogTail: tk.revertLogs, Containers: cs,
		Detail: fmt.Sprintf("%s: %s; reverted to %s: %s", f.Code, f.Detail, machine.ShortSha(to), served)}
	detail := fmt.Sprintf("reverted to %s: %s; %s is not applied again until tenancy desires another sha or `%s`", machine.ShortSha(to), served, machine.ShortSha(rec.Sha), tk.agentCommand("resume"))
	if err := tk.eng.Fire(machine.Outcome{Event: machine.EvReverted, Code: f.Code, Reason: f.Reason, Detail: detail, Update: func(r *store.Record, tx store.Tx) error {
		r.Failure.Reverted = true
		r.NextRetryAt, r.Parked = timeZero, true
		r.Containers, r.SeenAt = toStore(cs), tk.Now()
		return tk.enqueue(r, tx, machine.Failed, rep)
	}}, started); err != nil {
		return err
	}
	if ferr := tk.flushOutbox(ctx); ferr != nil && !effects.IsTemporary(ferr) {
		return ferr
	}
	tk.prune(ctx) // a revert is a successful apply of the release it brought back
	return parked(effects.Permanent, f.Code, "failed: %s: %s — reverted to %s, which serves; %s waits for a new desired sha or `%s`",
		f.Code, f.Detail, machine.ShortSha(to), machine.ShortSha(rec.Sha), tk.agentCommand("resume"))
}

// stillReverted is a tick while a revert is parked (the failed sha still desired): the release
// it brought back is judged as a heartbeat judges it and healed within heal_budget
// (keepServing; no lease, no OpenBao read, no fetch), and the failed sha stays parked. The
// check-in's entry says both; what was found when that release is not serving is kept on the
// failure (NotServing), for explain and status, until a tick finds it serving again. No report
// is sent: the failed one with reverted_to was sent when the revert passed its gate, and the
// check-ins carry what runs.
func (tk *tick) stillReverted(ctx context.Context) error {
	started := tk.Now()
	f := *tk.eng.Record().Failure
	serves, down, err := tk.keepServing(ctx)
	if err != nil {
		return err
	}
	to, failed := machine.ShortSha(f.RevertTo), machine.ShortSha(f.Sha)
	detail := fmt.Sprintf("reverted to %s after %s failed: %s — %s, %s", to, failed, f.Detail, to, serves)
	code, reason := f.Code, f.Reason
	if down.code != "" {
		code, reason = down.code, ""
	}
	if err := tk.eng.Note(machine.NoteCheckin, code, reason, detail, started, func(r *store.Record, _ store.Tx) error {
		if r.Failure != nil {
			r.Failure.NotServing, r.Failure.NotServingCode = down.detail, down.code
		}
		return nil
	}); err != nil {
		return err
	}
	return parked(effects.Permanent, code, "failed: %s: %s — reverted to %s, %s; %s waits for a new desired sha or `%s`", f.Code, f.Detail, to, serves, failed, tk.agentCommand("resume"))
}

// revertFailed ends a revert that did not bring the release back: the failure keeps the
// apply's code and says the revert failed too; the box parks and reverts no more.
func (tk *tick) revertFailed(ctx context.Context, why string) error {
	if pastDeadline(ctx) {
		return tk.errTickTimeout()
	}
	rec := tk.eng.Record()
	code, reason, detail, to := vocab.Unhealthy, vocab.Reason(""), "", ""
	if f := rec.Failure; f != nil {
		code, reason, detail, to = f.Code, f.Reason, f.Detail, f.RevertTo
	}
	words := fmt.Sprintf("the revert to %s failed too: %s — not reverting again", machine.ShortSha(to), why)
	rep := effects.Report{Sha: rec.Sha, Result: effects.ResultFailed, Code: code, LogTail: tk.logTail(ctx),
		Detail: fmt.Sprintf("%s: %s; %s", code, detail, words)}
	now := tk.Now()
	if err := tk.eng.Fire(machine.Outcome{Event: machine.EvFail, Code: code, Reason: reason, Detail: words, Update: func(r *store.Record, tx store.Tx) error {
		if r.Failure == nil {
			r.Failure = &store.Failure{Sha: r.Sha, Code: code, State: string(machine.Reverting), At: now, Limit: tk.MaxAttempts}
		}
		r.Failure.RevertFailed = why
		r.NextRetryAt, r.Parked = timeZero, true
		return tk.enqueue(r, tx, machine.Failed, rep)
	}}, tk.stepStart()); err != nil {
		return err
	}
	if ferr := tk.flushOutbox(ctx); ferr != nil && !effects.IsTemporary(ferr) {
		return ferr
	}
	return parked(effects.Permanent, code, "failed: %s: %s; %s", code, detail, words)
}
