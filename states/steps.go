package states

import (
	"context"
	"fmt"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

var timeZero time.Time

// apply is action apply: resume the flight towards this sha, or start it — unless the sha
// was refused (remembered) or failed and waits for its backoff.
func (tk *tick) apply(ctx context.Context, resp effects.CheckinResponse) error {
	rec := tk.eng.Record()
	st := tk.eng.State()
	sha := resp.DesiredSha
	now := tk.Now()
	switch {
	case st.InFlight() && rec.Action == vocab.ActionApply && rec.Sha == sha:
		if err := tk.eng.Note(machine.NoteCheckin, "", "", checkinDetail(resp, rec.AppliedSha)+" — resuming at "+string(st), now, nil); err != nil {
			return err
		}
	case st == machine.Refused && rec.Refusal != nil && rec.Refusal.Sha == sha:
		if !boxRefusal(rec.Refusal.Code) {
			_ = tk.eng.Note(machine.NoteCheckin, rec.Refusal.Code, rec.Refusal.Reason, "still refused: "+string(rec.Refusal.Code)+": "+rec.Refusal.Detail, now, nil)
			return parked(effects.Permanent, rec.Refusal.Code, "refused: %s: %s — waiting for a new desired sha or `%s`", rec.Refusal.Code, rec.Refusal.Detail, tk.agentCommand("resume"))
		}
		if rec.Refusal.Code != codeDisk {
			code, reason, detail, err := tk.composeReady(ctx)
			if err != nil {
				return err
			}
			if code != "" {
				// what is missing now (the CLI or compose v2) is the refusal's cause
				_ = tk.eng.Note(machine.NoteCheckin, code, reason, "still refused: "+string(code)+": "+detail, now, func(r *store.Record, _ store.Tx) error {
					if r.Refusal != nil && r.Refusal.Code == code {
						r.Refusal.Reason = reason
					}
					return nil
				})
				return parked(effects.Permanent, code, "refused: %s: %s — checked again every tick", code, detail)
			}
			if err := tk.startFlight(resp, machine.EvRecheck, "docker compose can run now: checking the bundle again"); err != nil {
				return err
			}
			return tk.drive(ctx)
		}
		ok, detail, err := tk.diskEnough(ctx, rec.Refusal.NeedBytes)
		if err != nil {
			return err
		}
		if !ok {
			free := tk.diskFree
			tk.eng.Defer(func(r *store.Record) { r.Refusal.FreeBytes = free })
			_ = tk.eng.Note(machine.NoteCheckin, codeDisk, rec.Refusal.Reason, "still refused: "+string(codeDisk)+": "+detail, now, nil)
			return parked(effects.Permanent, codeDisk, "refused: %s: %s — measured again every tick", codeDisk, detail)
		}
		why := "the disk check passes now"
		if tk.diskFree > rec.Refusal.FreeBytes && rec.Refusal.FreeBytes > 0 {
			why = "space freed"
		}
		if err := tk.startFlight(resp, machine.EvRecheck, why+" ("+detail+"): checking the bundle again"); err != nil {
			return err
		}
	case st == machine.Failed && rec.Action == vocab.ActionApply && rec.Failure != nil && rec.Failure.Sha == sha:
		n := rec.TotalAttempts()
		if rec.Parked && rec.Failure.Reverted {
			return tk.stillReverted(ctx)
		}
		if rec.Parked {
			_ = tk.eng.Note(machine.NoteCheckin, rec.Failure.Code, rec.Failure.Reason, fmt.Sprintf("parked after %d failed attempts: %s", n, rec.Failure.Detail), now, nil)
			return parked(effects.Permanent, rec.Failure.Code, "failed %d times: %s: %s — parked until `%s` or a new desired sha", n, rec.Failure.Code, rec.Failure.Detail, tk.agentCommand("resume"))
		}
		if now.Before(rec.NextRetryAt) {
			_ = tk.eng.Note(machine.NoteCheckin, rec.Failure.Code, rec.Failure.Reason, fmt.Sprintf("retry %d of %d at %s", n+1, tk.MaxAttempts, machine.Stamp(rec.NextRetryAt)), now, nil)
			return parked(effects.Permanent, rec.Failure.Code, "failed: %s: %s — retry %d of %d at %s", rec.Failure.Code, rec.Failure.Detail, n+1, tk.MaxAttempts, machine.Stamp(rec.NextRetryAt))
		}
		if err := tk.startFlight(resp, machine.EvRetry, fmt.Sprintf("retry %d of %d", n+1, tk.MaxAttempts)); err != nil {
			return err
		}
	default:
		if err := tk.startFlight(resp, "", checkinDetail(resp, rec.AppliedSha)); err != nil {
			return err
		}
	}
	return tk.drive(ctx)
}

// drive runs the apply's steps from the current state until the flight ends or a step
// cannot go on now. Each step commits its transition before the next begins.
func (tk *tick) drive(ctx context.Context) error {
	for {
		if tk.stopping() {
			return errStopped{}
		}
		if pastDeadline(ctx) {
			return tk.errTickTimeout()
		}
		st := tk.eng.State()
		if step, ok := steps[st]; ok {
			tk.stepStarted = tk.Now()
			if err := step(tk, ctx); err != nil {
				return err
			}
			continue
		}
		switch st {
		case machine.Reported:
			tk.prune(ctx)
			return nil
		case machine.Refused, machine.Failed, machine.Blocked:
			rec := tk.eng.Record()
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
	}
}

// steps is the apply path, in the order a flight runs it: the state a step leaves, and the
// step, each in the file named for it (stepVerify in step_verify.go, stepPreflight in
// step_preflight.go, …). Adding a state is one file and one row. Reported and the parked
// states end the flight (drive).
var steps = map[machine.State]func(*tick, context.Context) error{
	machine.CheckedIn:      (*tick).stepVerify,    // step_verify.go
	machine.BundleVerified: (*tick).stepPreflight, // step_preflight.go
	machine.Leased:         (*tick).stepLogin,     // step_login.go
	machine.LoggedIn:       (*tick).stepStage,     // step_stage.go
	machine.Staged:         (*tick).stepPull,      // step_pull.go
	machine.Pulled:         (*tick).stepUp,        // step_up.go
	machine.Up:             (*tick).stepHealthy,   // step_healthy.go
	machine.Healthy:        (*tick).stepReport,    // step_report.go
	machine.Reverting:      (*tick).stepRevert,    // step_revert.go
}

// stepStart is when the step in flight began (its whole wall time is the entry's), or now.
func (tk *tick) stepStart() time.Time {
	if tk.stepStarted.IsZero() {
		return tk.Now()
	}
	return tk.stepStarted
}

// startFlight moves the machine to CheckedIn for a flight of action towards sha: from a rest
// state by a check-in, from a flight in progress by superseding it.
func (tk *tick) startFlight(resp effects.CheckinResponse, event, detail string) error {
	st := tk.eng.State()
	rec := tk.eng.Record()
	if event == "" {
		event = machine.EvCheckin
		if st.InFlight() {
			event = machine.EvSupersede
			detail = fmt.Sprintf("superseded: %s %s → %s %s; %s", rec.Action, machine.ShortSha(rec.Sha), resp.Action, machine.ShortSha(resp.DesiredSha), detail)
		}
	}
	return tk.eng.Fire(machine.Outcome{Event: event, Detail: detail, Update: func(r *store.Record, _ store.Tx) error {
		if r.Sha != resp.DesiredSha || r.Action != resp.Action {
			r.Attempts, r.NextRetryAt, r.Parked = nil, timeZero, false
		}
		r.Action, r.Sha, r.BundleURL, r.Purge = resp.Action, resp.DesiredSha, resp.BundleURL, resp.PurgeVolumes
		if r.Refusal != nil && r.Refusal.Sha != resp.DesiredSha {
			r.Refusal = nil
		}
		if r.Failure != nil && r.Failure.Sha != resp.DesiredSha {
			r.Failure = nil
		}
		if r.Sha != resp.DesiredSha {
			r.RevertOnFailure = false // the new sha's bundle says, once staged
		}
		return nil
	}}, tk.Now())
}

func checkinDetail(resp effects.CheckinResponse, applied string) string {
	return fmt.Sprintf("action=%s desired=%s applied=%s", resp.Action, machine.ShortSha(resp.DesiredSha), machine.ShortSha(applied))
}
