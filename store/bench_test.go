package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/store"
)

// BenchmarkHeartbeatStore is a heartbeat's use of the state file in a fresh process: open (the
// check, or the receipt), one read transaction, one commit. MONKY_BENCH_STATE names a state
// file to copy (make bench passes the year's); without it, a file of 40 ticks. "receipt" is
// the agent as it runs; "check" removes the receipt before every open, so each one checks
// the whole file as every open did before the receipt.
func BenchmarkHeartbeatStore(b *testing.B) {
	src := os.Getenv("MONKY_BENCH_STATE")
	var raw []byte
	if src != "" {
		var err error
		if raw, err = os.ReadFile(src); err != nil {
			b.Fatal(err)
		}
	} else {
		raw = goodFile(b)
	}
	for _, mode := range []string{"receipt", "check"} {
		b.Run(mode, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "state.db")
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if mode == "check" {
					_ = os.Remove(path + store.ReceiptSuffix)
				}
				st, err := store.OpenBolt(path, store.BoltOptions{})
				if err != nil {
					b.Fatal(err)
				}
				var rec store.Record
				if err := st.View(func(tx store.Tx) error {
					var err error
					if rec, err = tx.Record(); err != nil {
						return err
					}
					_, err = tx.Outbox()
					return err
				}); err != nil {
					b.Fatal(err)
				}
				rec.Tick++
				if err := st.Update(func(tx store.Tx) error {
					if err := tx.PutRecord(rec); err != nil {
						return err
					}
					_, err := tx.Append(store.Entry{Tick: rec.Tick, From: "Reported", To: "Reported", Event: "checkin", Detail: strings.Repeat("d", 64)})
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
