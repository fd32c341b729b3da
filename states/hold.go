package states

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// MaxHold is the longest a hold may last: a hold nobody ends still ends by itself.
const MaxHold = 7 * 24 * time.Hour

// maxHoldReason is the most bytes of a hold's reason that are kept.
const maxHoldReason = 200

// Hold holds the box until until, for reason: the ticks check in, heartbeat and report, and
// applies and heals wait. It is a record in the state file, written under the tick's lock as a
// tick of its own (action hold) that names who ran it; a hold already in place is replaced. It
// returns the words it journaled.
func (a *Agent) Hold(until time.Time, reason string) (string, error) {
	a.defaults()
	now := a.Now()
	reason = strings.TrimSpace(sanitize.Line(reason))
	switch {
	case reason == "":
		return "", fmt.Errorf("a hold needs a reason (--reason): whoever finds the box held reads it")
	case len(reason) > maxHoldReason:
		return "", fmt.Errorf("the reason is %d bytes; at most %d", len(reason), maxHoldReason)
	case !until.After(now):
		return "", fmt.Errorf("the hold would end at %s, which is not after now (%s)", machine.Stamp(until), machine.Stamp(now))
	case until.Sub(now) > MaxHold:
		return "", fmt.Errorf("the hold would end at %s, %s from now: a hold lasts at most 7 days (168h)", machine.Stamp(until), until.Sub(now).Round(time.Minute))
	}
	h := &store.Hold{Reason: reason, By: a.operator(), Since: now.UTC(), Until: until.UTC()}
	detail := fmt.Sprintf("held by %s until %s: %s — applies and heals wait; check-ins, heartbeats and reports go on", h.By, machine.Stamp(h.Until), h.Reason)
	return detail, a.holdTick(func(r *store.Record) string { r.Hold = h; return detail })
}

// ReleaseHold ends the box's hold now; with none in place it says so and changes nothing.
func (a *Agent) ReleaseHold() (string, error) {
	a.defaults()
	var words string
	err := a.holdTick(func(r *store.Record) string {
		if !r.Hold.Active(a.Now()) {
			return ""
		}
		words = fmt.Sprintf("hold released by %s (it was by %s until %s: %s) — applies and heals go on at the next tick",
			a.operator(), r.Hold.By, machine.Stamp(r.Hold.Until), r.Hold.Reason)
		r.Hold = nil
		return words
	})
	if err == nil && words == "" {
		return "nothing to release: the box is not held", nil
	}
	return words, err
}

// holdTick journals a hold or a release as a tick of its own under the tick lock: set changes
// the record and returns the words; "" when there is nothing to change, and no tick is journaled.
func (a *Agent) holdTick(set func(r *store.Record) string) error {
	lk, held, err := lockFile(a.Cfg.LockPath())
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("a tick is running now; run hold again when it ends (ticks take seconds)")
	}
	defer lk.release()
	eng, err := machine.Load(a.Store, a.Now)
	if err != nil {
		return err
	}
	rec := eng.Record()
	detail := set(&rec)
	if detail == "" {
		return nil
	}
	envID := rec.EnvID
	if envID == "" {
		envID = a.Cfg.EnvID
	}
	if _, err := eng.BeginTick(envID); err != nil {
		return err
	}
	box := BoxOf(a.Cfg, a.Host)
	eng.Defer(func(r *store.Record) { r.Box = box })
	err = eng.Note(machine.NoteHold, "", "", detail, a.Now(), func(r *store.Record, _ store.Tx) error {
		r.Hold = rec.Hold
		return nil
	})
	end := eng.EndTick(machine.TickEnd{Exit: ExitCode(err), Action: vocab.ActionHold}, a.Retention)
	if err != nil {
		return err
	}
	return end
}

// hold is the box's hold that lasts now, nil when none; a hold whose time has passed is ended
// here, and the journal says so.
func (tk *tick) hold() *store.Hold {
	if tk.held != nil || tk.holdChecked {
		return tk.held
	}
	tk.holdChecked = true
	h := tk.eng.Record().Hold
	if h == nil {
		return nil
	}
	now := tk.Now()
	if h.Active(now) {
		tk.held = h
		return h
	}
	detail := fmt.Sprintf("the hold by %s (%s) ended at %s: applies and heals go on", h.By, h.Reason, machine.Stamp(h.Until))
	if err := tk.eng.Note(machine.NoteHoldEnded, "", "", detail, now, func(r *store.Record, _ store.Tx) error {
		r.Hold = nil
		return nil
	}); err != nil {
		tk.Log.Warn().Msg("end the hold: " + err.Error())
	}
	return nil
}

// heldWhy is the why a held box's check-ins and reports carry (PROTOCOL.md §1: code HELD, the
// reason, who and until when), for the record rec at state st. A desired sha parked after it
// failed does not wait for the hold: it stays parked when the hold ends, and the box needs a
// person whether held or not.
func heldWhy(h *store.Hold, st machine.State, rec store.Record) *effects.ReportWhy {
	c, _ := vocab.CauseOf(vocab.Held)
	verdict := effects.VerdictWorking
	next, person := machine.HeldNext(h, st, rec)
	if person {
		verdict = effects.VerdictNeedsPerson
	}
	return &effects.ReportWhy{Code: string(vocab.Held), Verdict: verdict, Since: h.Since.UTC().Format(time.RFC3339),
		Fault: c.Fault, Evidence: fmt.Sprintf("held by %s until %s: %s", h.By, machine.Stamp(h.Until), h.Reason), Next: next, Fix: c.Fix}
}

// heldApply is tenancy's apply while the box is held: the apply waits (the journal says so,
// once per desired sha and hold), and the release applied here is heartbeated as action none
// would — judged, reported, never healed. A desired sha whose revert is parked stays parked: the
// release the revert brought back is judged as every parked tick judges it (stillReverted),
// never healed while held.
func (tk *tick) heldApply(ctx context.Context, resp effects.CheckinResponse, containers []effects.Container, psErr error) error {
	h := tk.held
	rec := tk.eng.Record()
	detail := fmt.Sprintf("tenancy desires %s; held by %s until %s (%s): the apply waits", machine.ShortSha(resp.DesiredSha), h.By, machine.Stamp(h.Until), h.Reason)
	if machine.ParkedFailure(tk.eng.State(), rec, resp.DesiredSha) {
		detail = fmt.Sprintf("tenancy desires %s, parked after it failed: it waits for a new desired sha or `%s`, not for the hold; held by %s until %s (%s)",
			machine.ShortSha(resp.DesiredSha), tk.agentCommand("resume"), h.By, machine.Stamp(h.Until), h.Reason)
	}
	if h.Waits != resp.DesiredSha {
		// said once per desired sha and hold: the hold remembers which apply it keeps waiting
		if err := tk.eng.Note(machine.NoteHeld, vocab.Held, "", detail, tk.Now(), func(r *store.Record, _ store.Tx) error {
			if r.Hold != nil {
				r.Hold.Waits = resp.DesiredSha
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if machine.ParkedFailure(tk.eng.State(), rec, resp.DesiredSha) && rec.Failure.Reverted {
		// the release a parked revert brought back is judged as when not held; not healed
		return tk.stillReverted(ctx)
	}
	if remembered(tk.eng.State(), rec, resp.DesiredSha) {
		// a refusal or failure of the desired sha is the box's verdict, held or not: the tick
		// ends as an unheld one would (a person's), and a heartbeat's flight would forget it
		return heldVerdict(tk.eng.State(), rec, h, tk.agentCommand("resume"))
	}
	if rec.AppliedSha == "" || !tk.eng.State().Rest() {
		// nothing to heartbeat, or a flight that waits where it stands for the hold to end
		return nil
	}
	applied := resp
	applied.Action, applied.DesiredSha, applied.BundleURL, applied.PurgeVolumes = vocab.ActionNone, rec.AppliedSha, "", false
	return tk.heartbeat(ctx, applied, containers, psErr)
}

// heldVerdict is how a held tick ends whose desired sha is remembered (refused, or failed):
// as the unheld tick would, a person's fault under the refusal's or the failure's own code; what
// the hold changes is only that no recheck or retry runs until it ends. resume is the box's own
// resume command, as the unheld tick prints it.
func heldVerdict(st machine.State, rec store.Record, h *store.Hold, resume string) error {
	until := machine.Stamp(h.Until)
	if st == machine.Refused {
		return parked(effects.Permanent, rec.Refusal.Code, "refused: %s: %s — held until %s: checked again once the hold ends", rec.Refusal.Code, rec.Refusal.Detail, until)
	}
	f := rec.Failure
	if rec.Parked {
		return parked(effects.Permanent, f.Code, "failed: %s: %s — parked until a new desired sha or `%s`, whatever the hold (until %s)", f.Code, f.Detail, resume, until)
	}
	return parked(effects.Permanent, f.Code, "failed: %s: %s — held until %s: the retry waits for the hold", f.Code, f.Detail, until)
}

// remembered: st parks the desired sha — refused, or failed (a revert included) — so that
// the apply, once the hold ends, finds the verdict where it left it.
func remembered(st machine.State, rec store.Record, desired string) bool {
	switch st {
	case machine.Refused:
		return rec.Refusal != nil && rec.Refusal.Sha == desired
	case machine.Failed:
		return rec.Failure != nil && rec.Failure.Sha == desired
	}
	return false
}
