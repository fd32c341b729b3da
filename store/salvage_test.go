package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// salvageFile is a state file of ticks 1..n, and its bytes.
func salvageFile(t *testing.T, n uint64) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	b, _ := openN(t, path, BoltOptions{})
	for i := uint64(1); i <= n; i++ {
		tickOnce(t, b, i)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, raw
}

// salvageTick is the record's tick in st (an error when the record does not read).
func salvageTick(t *testing.T, st Store) (uint64, error) {
	t.Helper()
	var rec Record
	err := st.View(func(tx Tx) error {
		var err error
		rec, err = tx.Record()
		return err
	})
	return rec.Tick, err
}

// TestSalvageReadsThroughTheOlderMeta: a file whose newest meta page leads to a broken tree is
// corrupt to the agent, and Salvage reads it through the older meta page — the commit before —
// saying so, without changing the file and without a panic.
func TestSalvageReadsThroughTheOlderMeta(t *testing.T) {
	path, raw := salvageFile(t, 3)
	m0, m1 := decodeMeta(raw), decodeMeta(raw[defaultPageSize:])
	newest := m0
	if m1.txid > m0.txid {
		newest = m1
	}
	broken := append([]byte(nil), raw...)
	ps := int(newest.pageSize)
	for i := int(newest.root) * ps; i < int(newest.root+1)*ps; i++ {
		broken[i] = 0xff
	}
	if err := os.WriteFile(path, broken, 0o600); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptError
	if _, err := OpenBolt(path, BoltOptions{ReadOnly: true}); !errors.As(err, &ce) {
		t.Fatalf("the broken file opened: %v", err)
	}
	st, s, err := Salvage(path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !s.Older() || s.TxID != newest.txid-1 || s.Problem == "" {
		t.Errorf("salvaged %+v, want the older meta (txid %d) and the problem", s, newest.txid-1)
	}
	if tick, err := salvageTick(t, st); err != nil || tick != 2 {
		t.Errorf("the older meta's record: tick %d (%v), want 2 (the commit before the last)", tick, err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, broken) {
		t.Errorf("Salvage changed the corrupt file")
	}
}

// TestSalvageReadsATruncatedFile: a truncated file reads as far as its bytes go.
func TestSalvageReadsATruncatedFile(t *testing.T) {
	path, raw := salvageFile(t, 3)
	if err := os.WriteFile(path, raw[:len(raw)*3/4], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBolt(path, BoltOptions{ReadOnly: true}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("the truncated file opened: %v", err)
	}
	st, s, err := Salvage(path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if tick, err := salvageTick(t, st); err != nil || tick == 0 {
		t.Errorf("the record of a truncated file: tick %d (%v), salvaged %+v", tick, err, s)
	}
}

// TestSalvageNothingToRead: a file with no meta page says so.
func TestSalvageNothingToRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, bytes.Repeat([]byte("not a bolt file "), 512), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Salvage(path, t.TempDir()); err == nil {
		t.Errorf("a file with no meta page salvaged")
	}
}

// forgeHighWater sets the high-water mark of both meta pages in raw to pgid, checksums
// recomputed: a copy whose meta pages name far more pages than it holds.
func forgeHighWater(raw []byte, pgid uint64) {
	ne := binary.NativeEndian
	for _, off := range []int{0, defaultPageSize} {
		m := raw[off+pageHeaderSize : off+pageHeaderSize+metaSize]
		ne.PutUint64(m[40:], pgid)
		h := fnv.New64a()
		_, _ = h.Write(m[:metaSumOffset])
		ne.PutUint64(m[metaSumOffset:], h.Sum64())
	}
}

// TestSalvageRefusesAForgedHighWaterMark: a small copy whose meta pages name a gigabyte of
// pages is refused with words naming the mark, and costs neither the memory nor the disk it
// names (before, it was zero-filled in memory up to 1 GiB and written out whole).
func TestSalvageRefusesAForgedHighWaterMark(t *testing.T) {
	path, raw := salvageFile(t, 3)
	forgeHighWater(raw, (1<<30)/defaultPageSize)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, _, err := Salvage(path, dir)
	if err == nil || !strings.Contains(err.Error(), "high-water mark is page 262144") {
		t.Fatalf("got %v, want the forged high-water mark named", err)
	}
	var used int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if fi, e := os.Stat(p); err == nil && e == nil && fi.Mode().IsRegular() {
			used += fi.Size()
		}
		return nil
	})
	if used > int64(len(raw)) {
		t.Errorf("the salvage wrote %d bytes for a copy of %d", used, len(raw))
	}
}

// TestSalvagePadsATruncationWithAHole: a copy cut short is read with its missing pages as a
// hole: the scratch copy costs the disk of the bytes it holds, not of the pages it lacks.
func TestSalvagePadsATruncationWithAHole(t *testing.T) {
	path, raw := salvageFile(t, 3)
	cut := raw[:2*defaultPageSize+defaultPageSize/2]
	forgeHighWater(cut, 2048) // 8 MiB named, within what a truncation may lose
	if err := os.WriteFile(path, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, _, _ = Salvage(path, dir)
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		fi, e := os.Stat(p)
		if st, ok := fi.Sys().(*syscall.Stat_t); e == nil && ok && st.Blocks*512 > 1<<20 {
			t.Errorf("%s takes %d bytes of disk for a copy of %d", p, st.Blocks*512, len(cut))
		}
		return nil
	})
}
