package store_test

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/tikali/monky-deployd/store"
)

// txID is the id of the file's last committed transaction.
func txID(t *testing.T, path string) int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var id int
	if err := db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		t.Fatal(err)
	}
	return id
}

// Opening a state file that has its layout commits nothing (each commit is an fsync, and the
// timer's agent opens the file once a minute); a new file is initialised with one commit.
func TestOpenBoltCommitsNothingOnAFileWithItsLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := store.OpenBolt(path, store.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := txID(t, path)
	if created == 0 {
		t.Fatal("a new file was not initialised")
	}
	var bucketsOK bool
	if err := st.View(func(tx store.Tx) error {
		_, err := tx.Record()
		bucketsOK = err == nil
		return err
	}); err != nil || !bucketsOK {
		t.Fatalf("the new file is not usable: %v", err)
	}
	for i := 0; i < 3; i++ {
		if _, err := store.OpenBolt(path, store.BoltOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := txID(t, path); got != created {
		t.Errorf("three opens of a ready file committed %d times", got-created)
	}
}
