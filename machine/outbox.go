package machine

import (
	"fmt"

	"github.com/tikali/monky-deployd/store"
)

// ReportNotAcknowledged commits one more failed send of the queued report q: its attempt
// count goes up by one, in the Engine's transaction (with the tick's pending header and the
// record as it stands), the state unchanged. q must still be in the outbox; nothing changes
// when the commit fails.
//
// A report enters the outbox in the transaction of the transition that produced it
// (Outcome.Update) and leaves it in the transaction that acknowledges it (Fire, Note or
// Save): with this, every outbox write of a tick goes through the Engine.
func (e *Engine) ReportNotAcknowledged(q store.QueuedReport) error {
	q.Attempts++
	rec := cloneRecord(e.rec)
	if err := e.update(func(tx store.Tx) error {
		if err := tx.UpdateQueued(q); err != nil {
			return err
		}
		return tx.PutRecord(rec)
	}); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}
