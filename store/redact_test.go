package store_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/store"
)

// TestTheStoreIsARedactingSink: a registered value handed to the store in a journal entry's detail, the
// record's failure, refusal, block or last report, or a queued report's body (in plain and in
// JSON-escaped form) is never kept; the words around it are, and the body stays a JSON document.
func TestTheStoreIsARedactingSink(t *testing.T) {
	const canary = `Kq7"store-canary\x`
	redact.Add(canary)
	esc, _ := json.Marshal(canary)
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			st, reopen := im.open(t)
			body, _ := json.Marshal(map[string]any{"detail": "read db: " + canary, "containers": []string{canary}, "n": 3})
			var id uint64
			err := st.Update(func(tx store.Tx) error {
				if _, err := tx.Append(store.Entry{Tick: 1, At: t0, From: "a", To: "b", Event: "e", Code: "LEASE_FAILED", Detail: "lease: " + canary}); err != nil {
					return err
				}
				words := "kept " + canary
				if err := tx.PutRecord(store.Record{State: "Failed",
					Failure:    &store.Failure{Code: "F", Detail: words},
					Refusal:    &store.Refusal{Code: "R", Detail: words},
					Block:      &store.Block{Code: "B", Detail: words},
					LastReport: &store.LastReport{Result: "failed", Detail: words}}); err != nil {
					return err
				}
				var err error
				if id, err = tx.Enqueue(store.QueuedReport{Queued: t0, Body: body}); err != nil {
					return err
				}
				return tx.UpdateQueued(store.QueuedReport{ID: id, Queued: t0, Attempts: 1, Body: body})
			})
			if err != nil {
				t.Fatal(err)
			}
			var all []string
			if err := reopen().View(func(tx store.Tx) error {
				es, err := tx.Entries(1)
				if err != nil || len(es) != 1 {
					t.Fatalf("entries = %v, %v", es, err)
				}
				all = append(all, es[0].Detail)
				r, err := tx.Record()
				if err != nil {
					return err
				}
				all = append(all, r.Failure.Detail, r.Refusal.Detail, r.Block.Detail, r.LastReport.Detail)
				q, err := tx.Outbox()
				if err != nil || len(q) != 1 || q[0].Attempts != 1 {
					t.Fatalf("outbox = %+v, %v", q, err)
				}
				var b map[string]any
				if err := json.Unmarshal(q[0].Body, &b); err != nil {
					t.Fatalf("the queued body is no longer JSON: %v\n%s", err, q[0].Body)
				}
				all = append(all, string(q[0].Body))
				if b["n"] != 3.0 {
					t.Errorf("body's number = %v, want 3", b["n"])
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			for _, s := range all {
				if strings.Contains(s, canary) || strings.Contains(s, string(esc[1:len(esc)-1])) {
					t.Errorf("kept the secret: %q", s)
				}
				if !strings.Contains(s, redact.Mask) {
					t.Errorf("nothing masked in %q", s)
				}
			}
			if !strings.HasPrefix(all[0], "lease: ") {
				t.Errorf("detail lost its words: %q", all[1])
			}
		})
	}
}
