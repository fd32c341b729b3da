package store

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestPrecheckIgnoresTheOlderMetasPages: a kill in mid-commit can leave the older meta's
// freelist page already reused by the commit that was cut short; bbolt opens the newer meta and
// never reads it, so the file is whole. (Found by the chaos soak: such a file was called corrupt.)
func TestPrecheckIgnoresTheOlderMetasPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte(fmt.Sprint("k", i)), []byte("v"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m0 := decodeMeta(raw)
	m1 := decodeMeta(raw[m0.pageSize:])
	if m0.err != "" || m1.err != "" {
		t.Fatalf("fresh file: meta 0 %q, meta 1 %q", m0.err, m1.err)
	}
	older, newer := m0, m1
	if m0.txid > m1.txid {
		older, newer = m1, m0
	}
	if older.freelist == pgidNoFreelist || older.freelist == newer.freelist {
		t.Fatalf("older meta's freelist page %d, newer's %d: nothing to reuse", older.freelist, newer.freelist)
	}
	// what the cut commit wrote there: a branch page
	off := older.freelist * uint64(older.pageSize)
	page := make([]byte, older.pageSize)
	binary.NativeEndian.PutUint64(page, older.freelist)
	binary.NativeEndian.PutUint16(page[8:], 0x01)
	copy(raw[off:], page)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	problem, exists, err := precheck(path, time.Second, true)
	if err != nil || !exists || problem != "" {
		t.Fatalf("precheck: problem %q, exists %v, err %v; want a whole file", problem, exists, err)
	}
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("b")).Get([]byte("k3")); string(v) != "v" {
			return fmt.Errorf("k3 = %q", v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
