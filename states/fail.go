package states

import (
	"context"
	"fmt"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// failBecause commits a failure of this flight from the state whose step failed: counted,
// backed off, reported failed with the code and names only, parked after MaxAttempts. reason is
// the typed cause behind code (the error's, effects.ReasonOf), kept in the entry, the failure
// and the error it returns.
func (tk *tick) failBecause(ctx context.Context, from machine.State, code vocab.Code, reason vocab.Reason, detail string, withLogs bool) error {
	subject := tk.failSubject
	tk.failSubject = ""
	if pastDeadline(ctx) {
		// whatever failed may have failed for want of time: not this apply's failure; the
		// next tick does the step again
		return tk.errTickTimeout()
	}
	if to, why := tk.revertTarget(from, code); to != "" {
		return tk.startRevert(ctx, from, code, reason, detail, withLogs, to)
	} else if why != "" {
		detail += "; " + why
	}
	started := tk.stepStart()
	rec := tk.eng.Record()
	rep := effects.Report{Sha: rec.Sha, Result: effects.ResultFailed, Code: code, Detail: string(code) + ": " + detail, Containers: fromStore(rec.Containers)}
	if withLogs {
		rep.LogTail = tk.logTail(ctx)
	}
	now := tk.Now()
	var n int
	err := tk.eng.Fire(machine.Outcome{Event: machine.EvFail, Code: code, Reason: reason, Detail: detail, Update: func(r *store.Record, tx store.Tx) error {
		if r.Attempts == nil {
			r.Attempts = map[string]int{}
		}
		r.Failure = &store.Failure{Sha: r.Sha, Code: code, Reason: reason, Subject: subject, Detail: rep.Detail[len(code)+2:], State: string(from), At: now, Limit: tk.MaxAttempts}
		if code == vocab.StateUnwritable {
			// the agent's own disk, not the release: no attempt is spent, the next tick does the
			// step again and goes on by itself once the file can be written
			r.NextRetryAt, r.Parked = now, false
			return tk.enqueue(r, tx, machine.Failed, rep)
		}
		r.Attempts[string(from)]++
		n = r.TotalAttempts()
		r.NextRetryAt = now.Add(machine.Backoff(n))
		r.Parked = n >= tk.MaxAttempts
		return tk.enqueue(r, tx, machine.Failed, rep)
	}}, started)
	if err != nil {
		return err
	}
	if ferr := tk.flushOutbox(ctx); ferr != nil && !effects.IsTemporary(ferr) {
		return ferr
	}
	return &effects.Error{Op: "tick", Kind: effects.Permanent, Code: code, Reason: reason, Msg: fmt.Sprintf("failed: %s: %s", code, detail)}
}

// logTail is the project's logs for a failed report, as compose gives them: outgoing masks,
// escapes and cuts them.
func (tk *tick) logTail(ctx context.Context) string {
	dir := tk.currentDir()
	out, err := tk.Fx.Compose.Logs(ctx, dir, 50)
	if err != nil {
		return "compose logs: " + err.Error()
	}
	return out
}
