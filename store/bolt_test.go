package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tikali/monky-deployd/store"
)

var fixedNow = func() time.Time { return time.Date(2026, 11, 29, 3, 4, 5, 0, time.UTC) }

// logCapture collects Logf lines.
type logCapture struct{ lines []string }

func (l *logCapture) logf(format string, args ...any) {
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func mustOpen(t *testing.T, path string, opts store.BoltOptions) *store.Bolt {
	t.Helper()
	b, err := store.OpenBolt(path, opts)
	if err != nil {
		t.Fatalf("OpenBolt: %v", err)
	}
	return b
}

// record reads the store's record; an error fails the test.
func record(t *testing.T, s store.Store) store.Record {
	t.Helper()
	var r store.Record
	view(t, s, func(tx store.Tx) (err error) { r, err = tx.Record(); return err })
	return r
}

// assertWorks writes and reads back a record.
func assertWorks(t *testing.T, b *store.Bolt) {
	t.Helper()
	if err := b.Update(func(tx store.Tx) error { return tx.PutRecord(store.Record{State: "Idle", Tick: 9}) }); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if r := record(t, b); r.State != "Idle" || r.Tick != 9 {
		t.Errorf("record = %+v", r)
	}
}

func TestBoltCorruptFileMovedAside(t *testing.T) {
	for _, size := range []int{10, 4096, 40000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.db")
			garbage := bytes.Repeat([]byte("not a bolt file\x00\xff"), size/17+1)[:size]
			if err := os.WriteFile(path, garbage, 0o600); err != nil {
				t.Fatal(err)
			}
			var log logCapture
			b := mustOpen(t, path, store.BoltOptions{Logf: log.logf, Now: fixedNow})
			aside := path + ".corrupt-20261129T030405Z"
			got, err := os.ReadFile(aside)
			if err != nil {
				t.Fatalf("moved-aside file: %v", err)
			}
			if !bytes.Equal(got, garbage) {
				t.Errorf("moved-aside file does not hold the garbage")
			}
			if len(log.lines) != 1 {
				t.Fatalf("log lines = %q, want one", log.lines)
			}
			for _, want := range []string{path, aside, "starts fresh", "unusable"} {
				if !strings.Contains(log.lines[0], want) {
					t.Errorf("log line %q lacks %q", log.lines[0], want)
				}
			}
			assertWorks(t, b)
		})
	}
}

func TestBoltMovedAsideTwiceInOneSecond(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	for i := 0; i < 2; i++ {
		if err := os.WriteFile(path, []byte(fmt.Sprint("garbage ", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		mustOpen(t, path, store.BoltOptions{Now: fixedNow})
	}
	first, _ := os.ReadFile(path + ".corrupt-20261129T030405Z")
	second, _ := os.ReadFile(path + ".corrupt-20261129T030405Z-1")
	if string(first) != "garbage 0" || string(second) != "garbage 1" {
		t.Errorf("moved-aside files = %q, %q", first, second)
	}
}

// writeBolt makes a bolt file with the given bucket/key/values.
func writeBolt(t *testing.T, path string, kv map[string]map[string]string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		for bn, keys := range kv {
			b, err := tx.CreateBucketIfNotExists([]byte(bn))
			if err != nil {
				return err
			}
			for k, v := range keys {
				if err := b.Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestBoltWrongSchemaMovedAside(t *testing.T) {
	cases := map[string]map[string]map[string]string{
		"version 2":  {"meta": {"version": "2", "record": `{"state":"Up"}`}},
		"no version": {"meta": {"record": `{"state":"Up"}`}},
		"foreign":    {"other": {"a": "b"}},
	}
	for name, kv := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			writeBolt(t, path, kv)
			var log logCapture
			b := mustOpen(t, path, store.BoltOptions{Logf: log.logf, Now: fixedNow})
			if _, err := os.Stat(path + ".corrupt-20261129T030405Z"); err != nil {
				t.Errorf("not moved aside: %v", err)
			}
			if len(log.lines) != 1 || !strings.Contains(log.lines[0], "moved it aside") {
				t.Errorf("log = %q", log.lines)
			}
			if r := record(t, b); r.State != "" {
				t.Errorf("fresh store has record %+v", r)
			}
			assertWorks(t, b)
		})
	}
}

func TestBoltGoodFileKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	assertWorks(t, mustOpen(t, path, store.BoltOptions{}))
	var log logCapture
	b := mustOpen(t, path, store.BoltOptions{Logf: log.logf})
	if len(log.lines) != 0 {
		t.Errorf("log on a good file: %q", log.lines)
	}
	if matches, _ := filepath.Glob(path + ".corrupt-*"); len(matches) != 0 {
		t.Errorf("good file moved aside: %v", matches)
	}
	if r := record(t, b); r.Tick != 9 {
		t.Errorf("record lost: %+v", r)
	}
}

func TestBoltLockTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b := mustOpen(t, path, store.BoltOptions{})
	held, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	start := time.Now()
	err = b.Update(func(tx store.Tx) error {
		t.Error("fn ran while another handle held the file")
		return nil
	})
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("Update under a held lock = %v, want ErrLocked", err)
	}
	if d := time.Since(start); d < 900*time.Millisecond || d > 3*time.Second {
		t.Errorf("Update gave up after %v, want about 1 s", d)
	}
	if err := b.View(func(store.Tx) error { return nil }); !errors.Is(err, store.ErrLocked) {
		t.Errorf("View under a held lock = %v, want ErrLocked", err)
	}
	if _, err := store.OpenBolt(path, store.BoltOptions{Timeout: 100 * time.Millisecond}); !errors.Is(err, store.ErrLocked) {
		t.Errorf("OpenBolt under a held lock = %v, want ErrLocked", err)
	}
	if matches, _ := filepath.Glob(path + ".corrupt-*"); len(matches) != 0 {
		t.Errorf("a locked file was moved aside: %v", matches)
	}
}

// The lock is not held between transactions: another process can open the file right after.
func TestBoltLockReleasedBetweenTransactions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b := mustOpen(t, path, store.BoltOptions{})
	assertWorks(t, b)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("file still locked after Update: %v", err)
	}
	db.Close()
}

func TestBoltReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	assertWorks(t, mustOpen(t, path, store.BoltOptions{}))
	before, _ := os.ReadFile(path)

	ro := mustOpen(t, path, store.BoltOptions{ReadOnly: true})
	if err := ro.Update(func(store.Tx) error { return nil }); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("Update on read-only = %v, want ErrReadOnly", err)
	}
	if _, err := ro.CompactIfNeeded(0); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("CompactIfNeeded on read-only = %v, want ErrReadOnly", err)
	}
	if r := record(t, ro); r.Tick != 9 {
		t.Errorf("read-only record = %+v", r)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Errorf("read-only open changed the file")
	}

	// A damaged copy is an error in read-only mode, never moved aside.
	bad := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(bad, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.OpenBolt(bad, store.BoltOptions{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("read-only open of garbage = %v, want a 'corrupt' error", err)
	}
	if got, _ := os.ReadFile(bad); string(got) != "garbage" {
		t.Errorf("read-only open touched the damaged copy")
	}
	if matches, _ := filepath.Glob(bad + ".corrupt-*"); len(matches) != 0 {
		t.Errorf("read-only open moved the copy aside: %v", matches)
	}
	if _, err := store.OpenBolt(filepath.Join(t.TempDir(), "missing.db"), store.BoltOptions{ReadOnly: true}); err == nil {
		t.Errorf("read-only open of a missing file succeeded")
	}
}

func TestBoltCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b := mustOpen(t, path, store.BoltOptions{})
	assertWorks(t, b)
	if err := b.Check(); err != nil {
		t.Errorf("Check = %v", err)
	}
}

func TestBoltFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "var", "lib", "monky-deployd")
	path := filepath.Join(dir, "state.db")
	assertWorks(t, mustOpen(t, path, store.BoltOptions{}))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("state.db mode = %v, want 0600", fi.Mode().Perm())
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode = %v, want 0700", di.Mode().Perm())
	}
	// A file left wider by hand is tightened on open.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	mustOpen(t, path, store.BoltOptions{})
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("state.db mode after reopen = %v, want 0600", fi.Mode().Perm())
	}
}

func TestBoltCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b := mustOpen(t, path, store.BoltOptions{})
	detail := strings.Repeat("x", 900)
	if err := b.Update(func(tx store.Tx) error {
		for tick := uint64(1); tick <= 200; tick++ {
			if err := tx.PutTick(store.TickSummary{Tick: tick, StartedAt: t0}); err != nil {
				return err
			}
			for i := 0; i < 10; i++ {
				e := entry(tick, "Idle", "CheckedIn")
				e.Detail = detail
				if _, err := tx.Append(e); err != nil {
					return err
				}
			}
		}
		return tx.PutRecord(store.Record{State: "Reported", Tick: 200})
	}); err != nil {
		t.Fatal(err)
	}
	if did, err := b.CompactIfNeeded(0.5); err != nil || did {
		t.Errorf("CompactIfNeeded on a full file = %v, %v; want false", did, err)
	}
	if err := b.Update(func(tx store.Tx) error {
		for tick := uint64(1); tick <= 195; tick++ {
			if err := tx.DeleteTick(tick); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(path)
	did, err := b.CompactIfNeeded(0.5)
	if err != nil || !did {
		t.Fatalf("CompactIfNeeded after deletes = %v, %v; want true", did, err)
	}
	after, _ := os.Stat(path)
	if after.Size()*4 > before.Size() {
		t.Errorf("compaction: %d -> %d bytes, want at least 4x smaller", before.Size(), after.Size())
	}
	if after.Mode().Perm() != 0o600 {
		t.Errorf("compacted file mode = %v", after.Mode().Perm())
	}
	if _, err := os.Stat(path + ".compact"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf(".compact left behind: %v", err)
	}
	if err := b.Check(); err != nil {
		t.Errorf("Check after compaction: %v", err)
	}
	if err := b.View(func(tx store.Tx) error {
		r, _ := tx.Record()
		ticks, _ := tx.Ticks(0)
		es, err := tx.Entries(200)
		if r.Tick != 200 || len(ticks) != 5 || len(es) != 10 || es[9].Seq != 2000 {
			t.Errorf("after compaction: record %+v, %d ticks, %d entries", r, len(ticks), len(es))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Counters survived: the next seq follows the last one.
	if err := b.Update(func(tx store.Tx) error {
		seq, err := tx.Append(entry(201, "Idle", "CheckedIn"))
		if seq != 2001 {
			t.Errorf("seq after compaction = %d, want 2001", seq)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if did, err := b.CompactIfNeeded(0.5); err != nil || did {
		t.Errorf("second CompactIfNeeded = %v, %v; want false", did, err)
	}
}

// A full disk (here bbolt's MaxSize) fails the Update and keeps what was committed before.
func TestBoltMaxSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b := mustOpen(t, path, store.BoltOptions{MaxSize: 256 << 10})
	assertWorks(t, b)
	big := strings.Repeat("y", 1<<20)
	err := b.Update(func(tx store.Tx) error {
		_, err := tx.Append(store.Entry{Tick: 1, Detail: big})
		return err
	})
	if err == nil {
		t.Fatalf("Update past MaxSize succeeded")
	}
	if err := b.View(func(tx store.Tx) error {
		r, _ := tx.Record()
		n := 0
		_ = tx.AllEntries(func(store.Entry) error { n++; return nil })
		if r.Tick != 9 || n != 0 {
			t.Errorf("after a failed full-disk update: record %+v, %d entries", r, n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if matches, _ := filepath.Glob(path + ".corrupt-*"); len(matches) != 0 {
		t.Errorf("full file moved aside: %v", matches)
	}
}

func BenchmarkCommit(b *testing.B) {
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			s, _ := im.open(b)
			rec := store.Record{State: "Healthy", Action: "apply", Sha: "7a10", Attempts: map[string]int{"Up": 1}}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rec.Tick = uint64(i)
				if err := s.Update(func(tx store.Tx) error {
					if _, err := tx.Append(store.Entry{Tick: uint64(i), At: t0, From: "Up", To: "Healthy", Ms: 12}); err != nil {
						return err
					}
					return tx.PutRecord(rec)
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Damage to any one page after the meta pages never bricks the agent: damage bbolt notices at
// open (a panic on the freelist, a failed consistency check) moves the file aside; damage to a
// free page is harmless and the data is still there.
func TestBoltDamagedPageNeverBricks(t *testing.T) {
	const page = 4096
	movedAside := 0
	for pg := 2; ; pg++ {
		path := filepath.Join(t.TempDir(), "state.db")
		b := mustOpen(t, path, store.BoltOptions{})
		for i := 0; i < 3; i++ {
			assertWorks(t, b)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) < (pg+1)*page {
			break
		}
		for i := pg * page; i < (pg+1)*page; i++ {
			raw[i] = 0xA5
		}
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		var log logCapture
		b = mustOpen(t, path, store.BoltOptions{Logf: log.logf, Now: fixedNow})
		_, statErr := os.Stat(path + ".corrupt-20261129T030405Z")
		moved := statErr == nil
		if moved {
			movedAside++
			if len(log.lines) != 1 || !strings.Contains(log.lines[0], "starts fresh") {
				t.Errorf("page %d: log = %q", pg, log.lines)
			}
		} else if len(log.lines) != 0 {
			t.Errorf("page %d: log %q but nothing moved aside", pg, log.lines)
		}
		if err := b.View(func(tx store.Tx) error {
			r, err := tx.Record()
			if want := map[bool]uint64{true: 0, false: 9}[moved]; r.Tick != want {
				t.Errorf("page %d (moved aside: %v): record tick %d, want %d", pg, moved, r.Tick, want)
			}
			return err
		}); err != nil {
			t.Errorf("page %d: View after open: %v", pg, err)
		}
		assertWorks(t, b)
	}
	if movedAside == 0 {
		t.Errorf("no damaged page was noticed")
	}
}

// Two handles on one file (two processes) take turns: a short wait for the lock succeeds, and
// neither write is lost.
func TestBoltWritersTakeTurns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	a := mustOpen(t, path, store.BoltOptions{})
	b := mustOpen(t, path, store.BoltOptions{})
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.Update(func(tx store.Tx) error {
			close(started)
			time.Sleep(300 * time.Millisecond)
			_, err := tx.Append(entry(1, "Idle", "CheckedIn"))
			return err
		})
	}()
	<-started
	if err := b.Update(func(tx store.Tx) error {
		_, err := tx.Append(entry(2, "Idle", "CheckedIn"))
		return err
	}); err != nil {
		t.Fatalf("second writer: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("first writer: %v", err)
	}
	var got []string
	if err := a.View(func(tx store.Tx) error {
		return tx.AllEntries(func(e store.Entry) error {
			got = append(got, fmt.Sprintf("%d/%d", e.Seq, e.Tick))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1/1", "2/2"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("entries = %v, want %v", got, want)
	}
}
