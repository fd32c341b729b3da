package machine

import (
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/store"
)

// TestReportNotAcknowledged: a failed send is counted in the Engine's transaction, which
// also carries the tick's pending header and the deferred record; a report no longer in the
// outbox is refused and nothing is written.
func TestReportNotAcknowledged(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	st := store.NewMemory()
	var id uint64
	if err := st.Update(func(tx store.Tx) error {
		var err error
		id, err = tx.Enqueue(store.QueuedReport{Queued: now, Body: []byte(`{}`), Meta: store.QueuedReportMeta{Result: "applied", Sha: "abc"}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	e, err := Load(st, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	tick, _ := e.BeginTick("env-qa-02")
	e.Defer(func(r *store.Record) { r.DesiredSha = "abc" })
	var q store.QueuedReport
	read := func() (store.Record, bool) {
		var rec store.Record
		var ok bool
		if err := st.View(func(tx store.Tx) error {
			qs, err := tx.Outbox()
			if err != nil || len(qs) != 1 {
				t.Fatalf("outbox %v %v", qs, err)
			}
			q = qs[0]
			if rec, err = tx.Record(); err != nil {
				return err
			}
			_, ok, err = tx.GetTick(tick)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return rec, ok
	}

	if _, header := read(); header || q.Attempts != 0 {
		t.Fatalf("before: header written %v, attempts %d", header, q.Attempts)
	}
	if err := e.ReportNotAcknowledged(q); err != nil {
		t.Fatal(err)
	}
	rec, header := read()
	if q.ID != id || q.Attempts != 1 {
		t.Fatalf("queued %+v, want id %d with 1 attempt", q, id)
	}
	if !header || rec.Tick != tick || rec.DesiredSha != "abc" {
		t.Fatalf("header written %v, record tick %d desired %q", header, rec.Tick, rec.DesiredSha)
	}
	if err := e.ReportNotAcknowledged(q); err != nil {
		t.Fatal(err)
	}
	if read(); q.Attempts != 2 {
		t.Fatalf("attempts %d, want 2", q.Attempts)
	}

	gone := q
	gone.ID = id + 99
	if err := e.ReportNotAcknowledged(gone); err == nil || !strings.Contains(err.Error(), "not in the outbox") {
		t.Fatalf("a report not in the outbox: %v", err)
	}
	if read(); q.Attempts != 2 {
		t.Fatalf("a refused update changed the outbox: %+v", q)
	}
}
