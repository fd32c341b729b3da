package machine

import (
	"fmt"

	"github.com/tikali/monky-deployd/store"
)

// HeldNext is what happens next on a box held by h, at state st with record rec — the one
// sentence the check-in's HELD why, the report and explain/status all say. A desired sha the
// box refused or parked after it failed does not wait for the hold: it stays where it is when
// the hold ends, and the box needs a person whether held or not (needsPerson).
func HeldNext(h *store.Hold, st State, rec store.Record) (next string, needsPerson bool) {
	desired, applied, until := rec.DesiredSha, rec.AppliedSha, Stamp(h.Until)
	switch {
	case desired != "" && st == Refused && rec.Refusal != nil && rec.Refusal.Sha == desired:
		return fmt.Sprintf("release %s stays refused (%s) through the hold; it is checked again when the hold ends at %s", ShortSha(desired), rec.Refusal.Code, until), true
	case desired != "" && ParkedFailure(st, rec, desired):
		f := rec.Failure
		next = fmt.Sprintf("release %s stays parked (%s) when the hold ends at %s: it is not applied until tenancy desires another sha or `monky-deployd resume`", ShortSha(desired), f.Code, until)
		if f.Reverted {
			next += fmt.Sprintf("; %s, brought back by a revert, keeps serving", ShortSha(f.RevertTo))
		}
		return next, true
	case desired != "" && desired != applied:
		serving := "nothing (no release was applied here yet)"
		if applied != "" {
			serving = ShortSha(applied)
		}
		return fmt.Sprintf("the apply of %s waits until the hold ends at %s; %s keeps serving", ShortSha(desired), until, serving), false
	}
	return fmt.Sprintf("the hold ends by itself at %s; then applies and heals go on", until), false
}

// ParkedFailure: the desired sha failed and is parked (a revert's included) — remembered until
// tenancy desires another sha or a person resumes, whatever a hold does.
func ParkedFailure(st State, rec store.Record, desired string) bool {
	return st == Failed && rec.Parked && rec.Failure != nil && rec.Failure.Sha == desired
}
