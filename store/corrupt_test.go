package store_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/store"
)

// goodFile writes a state file with a few ticks of journal and returns its bytes.
func goodFile(t testing.TB) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	b, err := store.OpenBolt(path, store.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		if err := b.Update(func(tx store.Tx) error {
			if err := tx.PutRecord(store.Record{State: "Idle", Tick: uint64(i)}); err != nil {
				return err
			}
			_, err := tx.Append(store.Entry{Tick: uint64(i), From: "Idle", To: "Idle", Event: "checkin", Detail: strings.Repeat("x", 300)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// openEvery opens path read-only (status, explain) and read-write (run) and reads it: neither
// may crash the process; the read-write open must leave a working store.
func openEvery(t *testing.T, path string) {
	t.Helper()
	if ro, err := store.OpenBolt(path, store.BoltOptions{ReadOnly: true}); err == nil {
		_ = ro.View(func(tx store.Tx) error {
			_, _ = tx.Record()
			_, _ = tx.Ticks(0)
			return tx.AllEntries(func(store.Entry) error { return nil })
		})
	} else if !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("read-only open: %v is not ErrCorrupt", err)
	}
	rw, err := store.OpenBolt(path, store.BoltOptions{Now: fixedNow})
	if err != nil {
		t.Fatalf("read-write open: %v", err)
	}
	_ = rw.View(func(tx store.Tx) error {
		_, _ = tx.Record()
		return tx.AllEntries(func(store.Entry) error { return nil })
	})
	assertWorks(t, rw)
}

// A truncated, bit-flipped, zeroed or zero-length state file, a directory or a symlink where the
// file should be: opening and reading never crash the process (a SIGBUS in bbolt's mapping
// killed every command before), and `run`'s open moves the file aside and starts afresh.
func TestBoltCorruptionNeverCrashes(t *testing.T) {
	raw := goodFile(t)
	write := func(t *testing.T, b []byte) string {
		path := filepath.Join(t.TempDir(), "state.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := map[string]func(t *testing.T) string{
		"half":  func(t *testing.T) string { return write(t, raw[:len(raw)/2]) },
		"3/4":   func(t *testing.T) string { return write(t, raw[:len(raw)*3/4]) },
		"page3": func(t *testing.T) string { return write(t, raw[:3*4096]) },
		"empty": func(t *testing.T) string { return write(t, nil) },
		"dir": func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "state.db")
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
			return p
		},
		"symlink": func(t *testing.T) string {
			dir := t.TempDir()
			target := filepath.Join(dir, "elsewhere.db")
			if err := os.WriteFile(target, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "state.db")
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			return p
		},
	}
	for pg := 0; pg*4096 < len(raw); pg++ {
		cases["zero-page-"+string(rune('a'+pg%26))+itoa(pg)] = func(t *testing.T) string {
			b := append([]byte(nil), raw...)
			clear(b[pg*4096 : (pg+1)*4096])
			return write(t, b)
		}
	}
	for seed := uint64(1); seed <= 60; seed++ {
		cases["flip-"+itoa(int(seed))] = func(t *testing.T) string {
			b := append([]byte(nil), raw...)
			r := rand.New(rand.NewPCG(seed, 15))
			for i := 0; i < 8; i++ {
				b[len(b)/4+r.IntN(len(b)/2)] ^= byte(1 << r.IntN(8))
			}
			return write(t, b)
		}
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) { openEvery(t, mk(t)) })
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// A half-truncated file is moved aside by run's open, and the fresh file names the copy (what
// status and explain show); a read-only open says "corrupt" and moves nothing.
func TestBoltTruncatedFileMovedAsideAndNamed(t *testing.T) {
	raw := goodFile(t)
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, raw[:len(raw)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := store.OpenBolt(path, store.BoltOptions{ReadOnly: true})
	var ce *store.CorruptError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(ce.Problem, "truncated") {
		t.Fatalf("read-only open: %v", err)
	}
	if m, _ := filepath.Glob(path + ".corrupt-*"); len(m) != 0 {
		t.Fatalf("read-only open moved the file: %v", m)
	}
	b := mustOpen(t, path, store.BoltOptions{Now: fixedNow})
	aside := path + ".corrupt-20261129T030405Z"
	if _, err := os.Stat(aside); err != nil {
		t.Fatalf("not moved aside: %v", err)
	}
	ro := mustOpen(t, path, store.BoltOptions{ReadOnly: true})
	for _, s := range []*store.Bolt{b, ro} {
		m, err := s.MovedAside()
		if err != nil || m == nil || m.Path != aside || !strings.Contains(m.Problem, "truncated") {
			t.Errorf("MovedAside = %+v, %v", m, err)
		}
	}
}

// FuzzStateFile: whatever bytes the state file holds, opening it (read-only as status and
// explain do, read-write as run does) and reading it never crash the process.
func FuzzStateFile(f *testing.F) {
	raw := goodFile(f)
	f.Add(raw)
	f.Add(raw[:len(raw)/2])
	f.Add(raw[:8192])
	f.Add([]byte{})
	f.Add([]byte("not a bolt file"))
	z := append([]byte(nil), raw...)
	clear(z[2*4096 : 3*4096])
	f.Add(z)
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "state.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		openEvery(t, path)
	})
}

// A bit flipped inside meta/record's JSON leaves bbolt's structure intact, and every tick
// failed reading the record (exit 1, forever). run's open now moves such a file aside.
func TestBoltUndecodableRecordMovedAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b := mustOpen(t, path, store.BoltOptions{})
	if err := b.Update(func(tx store.Tx) error {
		return tx.PutRecord(store.Record{EnvID: "env-qa-02", State: "Reported", Tick: 7})
	}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(raw), `{"env_id":"env-qa-02"`)
	if i < 0 {
		t.Fatal("record not found in the file")
	}
	raw[i] = '['
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.OpenBolt(path, store.BoltOptions{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "meta/record does not decode") {
		t.Errorf("read-only open: %v", err)
	}
	b = mustOpen(t, path, store.BoltOptions{Now: fixedNow})
	if _, err := os.Stat(path + ".corrupt-20261129T030405Z"); err != nil {
		t.Errorf("not moved aside: %v", err)
	}
	if err := b.View(func(tx store.Tx) error { _, err := tx.Record(); return err }); err != nil {
		t.Errorf("the fresh file's record: %v", err)
	}
}
