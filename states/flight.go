package states

import (
	"context"
	"fmt"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

var timeZero time.Time

// apply is action apply: resume the flight towards this sha, or start it — unless the sha
// was refused (remembered) or failed and waits for its backoff.
func (a *Agent) apply(ctx context.Context, resp effects.CheckinResponse) error {
	rec := a.eng.Record()
	st := a.eng.State()
	sha := resp.DesiredSha
	now := a.Now()
	switch {
	case st.InFlight() && rec.Action == effects.ActionApply && rec.Sha == sha:
		if err := a.eng.Note(machine.NoteCheckin, "", checkinDetail(resp, rec.AppliedSha)+" — resuming at "+string(st), now, nil); err != nil {
			return err
		}
	case st == machine.Refused && rec.Refusal != nil && rec.Refusal.Sha == sha:
		if rec.Refusal.Code != codeDisk {
			_ = a.eng.Note(machine.NoteCheckin, rec.Refusal.Code, "still refused: "+rec.Refusal.Code+": "+rec.Refusal.Detail, now, nil)
			return parked(effects.Permanent, rec.Refusal.Code, "refused: %s: %s — waiting for a new desired sha or `monky-deployd resume`", rec.Refusal.Code, rec.Refusal.Detail)
		}
		ok, detail, err := a.diskEnough(ctx, rec.Refusal.NeedBytes)
		if err != nil {
			return err
		}
		if !ok {
			_ = a.eng.Note(machine.NoteCheckin, codeDisk, "still refused: "+codeDisk+": "+detail, now, nil)
			return parked(effects.Permanent, codeDisk, "refused: %s: %s — measured again every tick", codeDisk, detail)
		}
		if err := a.startFlight(resp, machine.EvRecheck, "space freed ("+detail+"): checking the bundle again"); err != nil {
			return err
		}
	case st == machine.Failed && rec.Action == effects.ActionApply && rec.Failure != nil && rec.Failure.Sha == sha:
		n := rec.TotalAttempts()
		if rec.Parked {
			_ = a.eng.Note(machine.NoteCheckin, rec.Failure.Code, fmt.Sprintf("parked after %d failed attempts: %s", n, rec.Failure.Detail), now, nil)
			return parked(effects.Permanent, rec.Failure.Code, "failed %d times: %s: %s — parked until `monky-deployd resume` or a new desired sha", n, rec.Failure.Code, rec.Failure.Detail)
		}
		if now.Before(rec.NextRetryAt) {
			_ = a.eng.Note(machine.NoteCheckin, rec.Failure.Code, fmt.Sprintf("retry %d of %d at %s", n+1, a.MaxAttempts, stamp(rec.NextRetryAt)), now, nil)
			return parked(effects.Permanent, rec.Failure.Code, "failed: %s: %s — retry %d of %d at %s", rec.Failure.Code, rec.Failure.Detail, n+1, a.MaxAttempts, stamp(rec.NextRetryAt))
		}
		if err := a.startFlight(resp, machine.EvRetry, fmt.Sprintf("retry %d of %d", n+1, a.MaxAttempts)); err != nil {
			return err
		}
	default:
		if err := a.startFlight(resp, "", checkinDetail(resp, rec.AppliedSha)); err != nil {
			return err
		}
	}
	return a.drive(ctx)
}

// drive runs the apply's steps from the current state until the flight ends or a step
// cannot go on now. Each step commits its transition before the next begins.
func (a *Agent) drive(ctx context.Context) error {
	for {
		if a.stopping() {
			return errStopped{}
		}
		if pastDeadline(ctx) {
			return a.errTickTimeout()
		}
		var err error
		a.stepStarted = a.Now()
		switch st := a.eng.State(); st {
		case machine.CheckedIn:
			err = a.stepVerify(ctx)
		case machine.BundleVerified:
			err = a.stepPreflight(ctx)
		case machine.Leased:
			err = a.stepLogin(ctx)
		case machine.LoggedIn:
			err = a.stepStage(ctx)
		case machine.Staged:
			err = a.stepPull(ctx)
		case machine.Pulled:
			err = a.stepUp(ctx)
		case machine.Up:
			err = a.stepHealthy(ctx)
		case machine.Healthy:
			ferr := a.flushOutbox(ctx)
			if ferr != nil || a.eng.State() == machine.Healthy {
				// the apply succeeded: old releases go whether or not tenancy has the report yet
				a.prune(ctx)
			}
			if ferr != nil {
				return ferr
			}
			if a.eng.State() == machine.Healthy {
				return &effects.Error{Op: "report", Kind: effects.Temporary, Msg: "the applied report waits in the outbox"}
			}
		case machine.Reported:
			a.prune(ctx)
			return nil
		case machine.Refused, machine.Failed, machine.Blocked:
			rec := a.eng.Record()
			if rec.Refusal != nil && st == machine.Refused {
				return parked(effects.Permanent, rec.Refusal.Code, "refused: %s: %s", rec.Refusal.Code, rec.Refusal.Detail)
			}
			if rec.Failure != nil && st == machine.Failed {
				return parked(effects.Permanent, rec.Failure.Code, "failed: %s: %s", rec.Failure.Code, rec.Failure.Detail)
			}
			return parked(effects.Permanent, "", "%s", st)
		default:
			return fmt.Errorf("apply: no step from state %s", st)
		}
		if err != nil {
			return err
		}
	}
}

// backoff is the wait after failed attempt n (1-based): 2, 4, 8, 16 … minutes, at most 30 —
// longer than the timer's minute from the first failure on.
func backoff(n int) time.Duration {
	d := 2 * time.Minute
	for i := 1; i < n && d < 30*time.Minute; i++ {
		d *= 2
	}
	if d > 30*time.Minute {
		d = 30 * time.Minute
	}
	return d
}

// fail commits a failure of this flight from the state whose step failed: counted, backed
// off, reported failed with the code and names only, parked after MaxAttempts.
func (a *Agent) fail(ctx context.Context, from machine.State, code, detail string, withLogs bool) error {
	if pastDeadline(ctx) {
		// whatever failed may have failed for want of time: not this apply's failure; the
		// next tick does the step again
		return a.errTickTimeout()
	}
	started := a.stepStart()
	rec := a.eng.Record()
	rep := effects.Report{Sha: rec.Sha, Result: effects.ResultFailed, Detail: code + ": " + detail, Containers: fromStore(rec.Containers)}
	if withLogs {
		rep.LogTail = a.logTail(ctx)
	}
	now := a.Now()
	var n int
	err := a.eng.Fire(machine.Outcome{Event: machine.EvFail, Code: code, Detail: detail, Update: func(r *store.Record, tx store.Tx) error {
		if r.Attempts == nil {
			r.Attempts = map[string]int{}
		}
		r.Attempts[string(from)]++
		n = r.TotalAttempts()
		r.Failure = &store.Failure{Sha: r.Sha, Code: code, Detail: rep.Detail[len(code)+2:], State: string(from), At: now, Limit: a.MaxAttempts}
		r.NextRetryAt = now.Add(backoff(n))
		r.Parked = n >= a.MaxAttempts
		return a.enqueue(r, tx, machine.Failed, rep)
	}}, started)
	if err != nil {
		return err
	}
	if ferr := a.flushOutbox(ctx); ferr != nil && !effects.IsTemporary(ferr) {
		return ferr
	}
	return parked(effects.Permanent, code, "failed: %s: %s", code, detail)
}

// refuse commits a refusal before the lease: nothing leased, logged in, read or started;
// reported failed with the code; remembered so the same sha is not fetched again.
func (a *Agent) refuse(ctx context.Context, code, detail string, needBytes int64) error {
	started := a.stepStart()
	rec := a.eng.Record()
	rep := effects.Report{Sha: rec.Sha, Result: effects.ResultFailed, Detail: code + ": " + detail, Containers: fromStore(rec.Containers)}
	now := a.Now()
	if err := a.eng.Fire(machine.Outcome{Event: machine.EvRefuse, Code: code, Detail: detail, Update: func(r *store.Record, tx store.Tx) error {
		r.Refusal = &store.Refusal{Sha: r.Sha, Code: code, Detail: rep.Detail[len(code)+2:], At: now, NeedBytes: needBytes}
		return a.enqueue(r, tx, machine.Refused, rep)
	}}, started); err != nil {
		return err
	}
	if err := a.flushOutbox(ctx); err != nil && !effects.IsTemporary(err) {
		return err
	}
	return parked(effects.Permanent, code, "refused: %s: %s", code, detail)
}

// stepStart is when the step in flight began (its whole wall time is the entry's), or now.
func (a *Agent) stepStart() time.Time {
	if a.stepStarted.IsZero() {
		return a.Now()
	}
	return a.stepStarted
}
