package store

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// openN opens path read-write (run's open) and says how many opens checked the whole file.
func openN(t *testing.T, path string, opts BoltOptions) (*Bolt, int) {
	t.Helper()
	b, err := OpenBolt(path, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return b, b.fullChecks
}

// tickOnce is one heartbeat's use of the store: a read, then a commit.
func tickOnce(t *testing.T, b *Bolt, n uint64) {
	t.Helper()
	if err := b.View(func(tx Tx) error { _, err := tx.Record(); return err }); err != nil {
		t.Fatalf("view: %v", err)
	}
	if err := b.Update(func(tx Tx) error {
		if err := tx.PutRecord(Record{State: "Reported", Tick: n}); err != nil {
			return err
		}
		_, err := tx.Append(Entry{Tick: n, From: "Reported", To: "Reported", Event: "checkin", Detail: strings.Repeat("d", 200)})
		return err
	}); err != nil {
		t.Fatalf("update: %v", err)
	}
}

// A file the check passed, and every commit of this store on it, carry a receipt: the next
// opens (run's and status's) skip the whole-file check, for as long as the receipt is current.
func TestAReceiptStandsInForTheCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	now := time.Now()
	clock := func() time.Time { return now }
	b, n := openN(t, path, BoltOptions{Now: clock})
	if n != 1 {
		t.Fatalf("a new file: %d full checks, want 1", n)
	}
	for i := uint64(1); i <= 3; i++ {
		tickOnce(t, b, i)
		b, n = openN(t, path, BoltOptions{Now: clock})
		if n != 0 {
			t.Fatalf("tick %d: the next open checked the whole file although the receipt matched", i)
		}
	}
	ro, err := OpenBolt(path, BoltOptions{ReadOnly: true, Now: clock})
	if err != nil || ro.fullChecks != 0 {
		t.Fatalf("read-only open: err %v, %d full checks, want none", err, ro.fullChecks)
	}
	fi, err := os.Lstat(path + ReceiptSuffix)
	if err != nil || fi.Mode().Perm() != fileMode {
		t.Fatalf("receipt: %v, mode %v", err, fi.Mode())
	}
	// past receiptMaxAge since the check last ran, commits or not, the check runs again
	now = now.Add(receiptMaxAge + time.Minute)
	if _, n = openN(t, path, BoltOptions{Now: clock}); n != 1 {
		t.Errorf("a receipt older than %v: %d full checks, want 1", receiptMaxAge, n)
	}
	if _, n = openN(t, path, BoltOptions{Now: clock}); n != 0 {
		t.Errorf("after that check: %d full checks, want none", n)
	}
}

// Any byte changed by anyone but this store's commit brings the check back, and a damaged file
// is moved aside as before: the receipt never hides damage.
func TestAChangedByteBringsTheCheckBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b, _ := openN(t, path, BoltOptions{})
	for i := uint64(1); i <= 5; i++ {
		tickOnce(t, b, i)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// one letter of a journal entry's detail: the bytes change, the structure does not
	at := strings.LastIndex(string(raw), strings.Repeat("d", 200))
	if at < 0 {
		t.Fatal("no entry detail in the file")
	}
	flip(t, path, int64(at), 'e')
	b, n := openN(t, path, BoltOptions{})
	if n != 1 {
		t.Fatalf("one byte changed: %d full checks, want 1", n)
	}
	tickOnce(t, b, 6)
	// both meta pages overwritten (the soak's corruption): moved aside, a fresh file
	for i := int64(0); i < 2*4096; i++ {
		flip(t, path, i, 0xA5)
	}
	b, n = openN(t, path, BoltOptions{Now: fixedNowInternal})
	if n != 1 {
		t.Fatalf("meta pages overwritten: %d full checks, want 1", n)
	}
	if _, err := os.Stat(path + ".corrupt-20261129T030405Z"); err != nil {
		t.Fatalf("the damaged file was not moved aside: %v", err)
	}
	var rec Record
	if err := b.View(func(tx Tx) error { var err error; rec, err = tx.Record(); return err }); err != nil || rec.Tick != 0 {
		t.Fatalf("after the move: record tick %d, err %v; want a fresh file", rec.Tick, err)
	}
}

// A receipt that cannot be trusted — another user's to write, a symlink, one that does not
// decode, one for other bytes — is no receipt: the check runs.
func TestAnUntrustedReceiptIsIgnored(t *testing.T) {
	cases := map[string]func(t *testing.T, receiptPath string){
		"group-writable": func(t *testing.T, p string) {
			if err := os.Chmod(p, 0o620); err != nil {
				t.Fatal(err)
			}
		},
		"symlink": func(t *testing.T, p string) {
			other := p + ".elsewhere"
			if err := os.Rename(p, other); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, p); err != nil {
				t.Fatal(err)
			}
		},
		"garbage": func(t *testing.T, p string) {
			if err := os.WriteFile(p, []byte("monky-deployd-receipt 2 x 0 now\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"another file's": func(t *testing.T, p string) {
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			r := decodeReceipt(raw)
			if r == nil {
				t.Fatalf("the receipt does not decode: %q", raw)
			}
			r.CRC32 ^= 1
			if err := os.WriteFile(p, r.encode(), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"version 1, CRC-32C": func(t *testing.T, p string) {
			// the receipt an older agent left: right in its own terms, read as no receipt
			path := strings.TrimSuffix(p, ReceiptSuffix)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			old, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			r := decodeReceipt(old)
			if r == nil {
				t.Fatal("no receipt to replace")
			}
			v1 := fmt.Sprintf("monky-deployd-receipt 1 %d %08x %s\n", len(raw), crc32.Checksum(raw, crc32.MakeTable(crc32.Castagnoli)), r.CheckedAt.Format(time.RFC3339Nano))
			if err := os.WriteFile(p, []byte(v1), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"from the future": func(t *testing.T, p string) {
			path := strings.TrimSuffix(p, ReceiptSuffix)
			size, crc, err := sumPath(path)
			if err != nil {
				t.Fatal(err)
			}
			b := &Bolt{path: path, opts: BoltOptions{Logf: t.Logf}}
			b.writeReceipt(receipt{Size: size, CRC32: crc, CheckedAt: time.Now().Add(time.Hour)})
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			b, _ := openN(t, path, BoltOptions{})
			tickOnce(t, b, 1)
			spoil(t, path+ReceiptSuffix)
			if _, n := openN(t, path, BoltOptions{}); n != 1 {
				t.Errorf("%d full checks, want 1", n)
			}
		})
	}
}

// A commit renews the receipt only on the bytes it vouched for: when another writer committed
// since this store last knew the file, its commit drops the receipt and the next open checks.
func TestACommitOnBytesTheReceiptDidNotVouchForDropsIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	a, _ := openN(t, path, BoltOptions{})
	other, _ := openN(t, path, BoltOptions{})
	tickOnce(t, other, 1) // a's view of the file is now stale
	tickOnce(t, a, 2)
	if _, err := os.Lstat(path + ReceiptSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the receipt survived a commit on bytes it did not vouch for: %v", err)
	}
	if _, n := openN(t, path, BoltOptions{}); n != 1 {
		t.Errorf("%d full checks, want 1", n)
	}
}

// Should a receipt ever match a damaged file (written by hand, or a fault bbolt wrote itself),
// reading it still never crashes the process, the receipt is dropped at the first damaged
// read, and the next open checks the whole file and moves it aside.
func TestADamagedReadDropsAForgedReceipt(t *testing.T) {
	raw := goodFileInternal(t)
	noticed, caught, pages := 0, 0, 0
	for pg := 2; pg*4096 < len(raw); pg++ {
		pages++
		path := filepath.Join(t.TempDir(), "state.db")
		bad := append([]byte(nil), raw...)
		clear(bad[pg*4096 : (pg+1)*4096])
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		forge(t, path)
		// status, explain and a support copy read it first: they write nothing, the receipt stays
		if ro, err := OpenBolt(path, BoltOptions{ReadOnly: true, Now: fixedNowInternal}); err == nil {
			_ = ro.View(func(tx Tx) error { return tx.AllEntries(func(Entry) error { return nil }) })
		}
		if _, err := os.Lstat(path + ReceiptSuffix); err != nil {
			t.Fatalf("page %d: a read-only open removed the receipt: %v", pg, err)
		}
		b, err := OpenBolt(path, BoltOptions{Now: fixedNowInternal})
		if err != nil {
			t.Fatalf("page %d: open with a matching receipt: %v", pg, err)
		}
		if b.fullChecks != 0 {
			// the freelist is checked even with a receipt: bbolt's open reads it
			caught++
			if _, err := os.Stat(path + ".corrupt-20261129T030405Z"); err != nil {
				t.Errorf("page %d: checked despite the receipt, yet not moved aside: %v", pg, err)
			}
			continue
		}
		rerr := b.View(func(tx Tx) error {
			if _, err := tx.Record(); err != nil {
				return err
			}
			return tx.AllEntries(func(Entry) error { return nil })
		})
		werr := b.Update(func(tx Tx) error { return tx.PutRecord(Record{State: "Idle", Tick: 1}) })
		if rerr == nil && werr == nil {
			continue // this page was not read, or its zeros still read as a page
		}
		noticed++
		if _, err := os.Lstat(path + ReceiptSuffix); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("page %d: a damaged read (%v / %v) left the receipt", pg, rerr, werr)
		}
		b, err = OpenBolt(path, BoltOptions{Now: fixedNowInternal})
		if err != nil {
			t.Fatalf("page %d: the open after the damaged read: %v", pg, err)
		}
		if b.fullChecks != 1 {
			t.Errorf("page %d: the open after the damaged read did not check the file", pg)
		}
		if err := b.Update(func(tx Tx) error { return tx.PutRecord(Record{State: "Idle", Tick: 2}) }); err != nil {
			t.Errorf("page %d: the store does not work after the check: %v", pg, err)
		}
	}
	if noticed == 0 {
		t.Error("no zeroed page was ever read: the test proves nothing")
	}
	t.Logf("%d pages zeroed: %d read as damaged (receipt dropped, moved aside at the next open), %d caught at the open, %d never read", pages, noticed, caught, pages-noticed-caught)
}

func flip(t *testing.T, path string, at int64, to byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{to}, at); err != nil {
		t.Fatal(err)
	}
}

// forge writes a current receipt for the file as it is now.
func forge(t *testing.T, path string) {
	t.Helper()
	size, crc, err := sumPath(path)
	if err != nil {
		t.Fatal(err)
	}
	(&Bolt{path: path, opts: BoltOptions{Logf: t.Logf}}).writeReceipt(receipt{Size: size, CRC32: crc, CheckedAt: fixedNowInternal()})
}

func fixedNowInternal() time.Time { return time.Date(2026, 11, 29, 3, 4, 5, 0, time.UTC) }

// goodFileInternal writes a state file with a few ticks of journal and returns its bytes.
func goodFileInternal(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	b, _ := openN(t, path, BoltOptions{})
	for i := uint64(0); i < 40; i++ {
		tickOnce(t, b, i)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
