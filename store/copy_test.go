package store

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A copy that is not a state file is refused before it is mapped or read, in bounded time.
func TestCheckCopyRefusesWhatIsNoStateFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.db")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse.db")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(3 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	big := filepath.Join(dir, "big.db")
	if f, err = os.Create(big); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxCopyBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for path, want := range map[string]string{
		fifo: "not a regular file", zero: "not a regular file", sparse: "more than a copy may hold", big: "more than a copy may hold",
	} {
		done := make(chan error, 1)
		go func() { done <- CheckCopy(path) }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want %q", filepath.Base(path), err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: CheckCopy blocked", filepath.Base(path))
		}
	}
	holes := filepath.Join(dir, "holes.db")
	if f, err = os.Create(holes); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := CheckCopy(holes); err == nil || !strings.Contains(err.Error(), "sparse") {
		t.Errorf("a 64 MiB file of holes: %v", err)
	}
	sound := filepath.Join(dir, "state.db")
	if _, err := OpenBolt(sound, BoltOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := CheckCopy(sound); err != nil {
		t.Errorf("a sound state file: %v", err)
	}
}
