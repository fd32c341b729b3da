package filestest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tikali/monky-deployd/effects/files"
)

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func TestCrashFSKeepsOnlyWhatWasSynced(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "old"), []byte("old\n"), 0o600)
	os.WriteFile(filepath.Join(root, "db"), []byte("bbolt"), 0o600)
	c, err := NewCrashFS(root, func(rel string) bool { return rel == "db" })
	if err != nil {
		t.Fatal(err)
	}
	p := func(n string) string { return filepath.Join(root, n) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.WriteFile(p("synced"), []byte("s"), 0o600))
	must(c.SyncFile(p("synced")))
	must(c.WriteFile(p("unsynced"), []byte("u"), 0o644))
	must(files.WriteAtomicFS(c, p("atomic"), []byte("a\n"), 0o600))
	must(c.SyncDir(root))
	must(c.Mkdir(p("d"), 0o700)) // the entry of d in root is never synced
	must(c.WriteFile(p("d/f"), []byte("f"), 0o600))
	must(c.SyncFile(p("d/f")))
	must(c.SyncDir(p("d")))
	must(c.Rename(p("old"), p("renamed"))) // rename not synced
	must(c.Remove(p("atomic")))            // remove not synced
	os.WriteFile(p("db"), []byte("bbolt2"), 0o600)
	if err := c.Crash(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"synced": "s", "unsynced": "", "atomic": "a\n", "old": "old\n", "db": "bbolt2",
	} {
		if got := read(t, p(name)); got != want {
			t.Errorf("%s after the crash: %q, want %q", name, got, want)
		}
	}
	for _, gone := range []string{"d", "renamed"} {
		if _, err := os.Lstat(p(gone)); !os.IsNotExist(err) {
			t.Errorf("%s survived the crash without a directory fsync", gone)
		}
	}
	if st, _ := os.Stat(p("unsynced")); st == nil || st.Mode().Perm() != 0o644 {
		t.Errorf("unsynced file mode: %v", st)
	}
}

func TestCrashFSPanicsAtItsCrashPointAndStopsThere(t *testing.T) {
	root := t.TempDir()
	c, err := NewCrashFS(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.CrashAt(3) // create, fsync, then the rename
	func() {
		defer func() {
			if r := recover(); r != ErrCrashed {
				t.Fatalf("recovered %v, want ErrCrashed", r)
			}
		}()
		_ = files.WriteAtomicFS(c, filepath.Join(root, "tok"), []byte("t\n"), 0o600)
		t.Fatal("no crash at operation 3")
	}()
	if err := c.Mkdir(filepath.Join(root, "x"), 0o700); !errors.Is(err, ErrCrashed) {
		t.Errorf("an operation after the crash: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "x")); err == nil {
		t.Errorf("an operation after the crash reached the disk")
	}
	if err := c.Crash(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 0 {
		t.Errorf("the temp file was never in a synced directory, yet %d entries survive", len(entries))
	}
	if err := c.WriteFile(filepath.Join(root, "after"), nil, 0o600); err != nil {
		t.Errorf("after Crash the FS works again: %v", err)
	}
}
