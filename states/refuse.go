package states

import (
	"context"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// refuse commits a refusal before the lease: nothing leased, logged in, read or started;
// reported failed with the code; remembered so the same sha is not fetched again. reason is
// the typed cause behind code ("" when the code says all), kept in the entry and the refusal.
func (tk *tick) refuse(ctx context.Context, code vocab.Code, reason vocab.Reason, detail string, needBytes int64) error {
	started := tk.stepStart()
	rec := tk.eng.Record()
	rep := effects.Report{Sha: rec.Sha, Result: effects.ResultFailed, Code: code, Detail: string(code) + ": " + detail, Containers: fromStore(rec.Containers)}
	now := tk.Now()
	if err := tk.eng.Fire(machine.Outcome{Event: machine.EvRefuse, Code: code, Reason: reason, Detail: detail, Update: func(r *store.Record, tx store.Tx) error {
		r.Refusal = &store.Refusal{Sha: r.Sha, Code: code, Reason: reason, Detail: rep.Detail[len(code)+2:], At: now, NeedBytes: needBytes}
		if code == codeDisk {
			r.Refusal.FreeBytes = tk.diskFree
		}
		return tk.enqueue(r, tx, machine.Refused, rep)
	}}, started); err != nil {
		return err
	}
	tk.dropKeptBundle(rec.Sha)
	if err := tk.flushOutbox(ctx); err != nil && !effects.IsTemporary(err) {
		return err
	}
	return parked(effects.Permanent, code, "refused: %s: %s", code, detail)
}
