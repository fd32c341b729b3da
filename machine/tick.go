package machine

import (
	"time"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/store"
)

// BeginTick numbers a new tick. Its header is written with the tick's first commit (a tick
// that commits nothing before a crash left nothing to journal). A tick that starts from
// Reported starts from Idle.
func (e *Engine) BeginTick(envID string) (uint64, error) {
	now := e.now()
	e.rec.EnvID = envID
	e.rec.Tick++
	e.rec.LastTickAt = now
	e.pendingTick = &store.TickSummary{Tick: e.rec.Tick, StartedAt: now, DesiredSha: e.rec.DesiredSha, AppliedSha: e.rec.AppliedSha}
	if e.State() == Reported {
		e.Restart(Idle)
	}
	return e.rec.Tick, nil
}

// TickEnd is what a finished tick records in its header.
type TickEnd struct {
	Exit   int
	Action string
	// Read, when set, reads the state file as the end commits it, in the same transaction
	// (the tick's verdict for its closing line, without another open of the file).
	Read func(tx store.Tx) error
}

// EndTick records the tick's exit, folds it into the previous tick when it changed nothing
// (a heartbeat like the one before it), and applies the journal's retention.
func (e *Engine) EndTick(end TickEnd, keep store.Retention) error {
	now := e.now()
	rec := cloneRecord(e.rec)
	rec.LastExit = end.Exit
	return e.update(func(tx store.Tx) error {
		sum, ok, err := tx.GetTick(rec.Tick)
		if err != nil {
			return err
		}
		if !ok {
			sum = store.TickSummary{Tick: rec.Tick, StartedAt: now}
		}
		exit := end.Exit
		sum.Exit = &exit
		if exit == vocab.ExitTemporary {
			if rec.Temporary.Ticks == 0 {
				rec.Temporary.Since = sum.StartedAt
			}
			rec.Temporary.Ticks++
		} else {
			rec.Temporary = store.TemporaryRun{}
		}
		sum.EndedAt = now
		sum.Action = end.Action
		sum.DesiredSha = rec.DesiredSha
		sum.AppliedSha = rec.AppliedSha
		if folded, err := fold(tx, sum, now); err != nil {
			return err
		} else if !folded {
			if err := tx.PutTick(sum); err != nil {
				return err
			}
		}
		if err := tx.PutRecord(rec); err != nil {
			return err
		}
		// retention reads every tick header: once an hour of ticks is enough
		if rec.Tick%PruneEvery == 0 {
			if _, err := tx.Prune(keep, now); err != nil {
				return err
			}
		}
		if end.Read != nil {
			if err := end.Read(tx); err != nil {
				return err
			}
		}
		e.rec = rec
		return nil
	})
}

// fold merges a quiet tick (exit 0) into the tick before it when both did the same thing with
// the same result: the older header counts it (Folded, LastAt) and the newer one's entries go.
// A tick that ended exit 1, 75 or 78 is kept as a tick of its own (docs/JOURNAL.md, "Retention
// and folding": only quiet heartbeats fold), so that every failed tick reads as one.
func fold(tx store.Tx, sum store.TickSummary, now time.Time) (bool, error) {
	if sum.Tick < 2 || sum.Exit == nil || *sum.Exit != vocab.ExitOK {
		return false, nil
	}
	prevs, err := tx.Ticks(2)
	if err != nil || len(prevs) < 2 {
		return false, err
	}
	prev := prevs[0]
	if prevs[1].Tick != sum.Tick || prev.Exit == nil || *prev.Exit != *sum.Exit ||
		prev.Action != sum.Action || prev.DesiredSha != sum.DesiredSha || prev.AppliedSha != sum.AppliedSha {
		return false, nil
	}
	a, err := tx.Entries(prev.Tick)
	if err != nil {
		return false, err
	}
	b, err := tx.Entries(sum.Tick)
	if err != nil {
		return false, err
	}
	if len(a) != len(b) {
		return false, nil
	}
	for i := range a {
		if a[i].From != b[i].From || a[i].To != b[i].To || a[i].Event != b[i].Event || a[i].Code != b[i].Code || a[i].Reason != b[i].Reason || a[i].Detail != b[i].Detail {
			return false, nil
		}
	}
	if err := tx.DeleteTick(sum.Tick); err != nil {
		return false, err
	}
	prev.Folded++
	prev.LastAt = now
	return true, tx.PutTick(prev)
}
