package disk

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestFree(t *testing.T) {
	dir := t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	want := uint64(st.Bavail) * uint64(st.Bsize)
	// Others write to this filesystem at the same time: compare within 256 MiB.
	near := func(got uint64) bool {
		d := int64(got) - int64(want)
		return d > -(256<<20) && d < 256<<20
	}
	got, err := Statfs{}.Free(dir)
	if err != nil || got == 0 || !near(got) {
		t.Fatalf("Free(%s) = %d, %v; statfs says %d", dir, got, err, want)
	}
	// A path that does not exist yet is measured at its nearest existing ancestor.
	missing := filepath.Join(dir, "var", "lib", "containerd")
	got, err = Statfs{}.Free(missing)
	if err != nil || !near(got) {
		t.Errorf("Free(missing) = %d, %v; want about %d", got, err, want)
	}
	// Under a regular file (ENOTDIR) too.
	f := filepath.Join(dir, "file")
	if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := (Statfs{}).Free(filepath.Join(f, "below")); err != nil || !near(got) {
		t.Errorf("Free(under a file) = %d, %v", got, err)
	}
	// A relative path is taken from the working directory.
	t.Chdir(dir)
	if got, err := (Statfs{}).Free("not/yet"); err != nil || !near(got) {
		t.Errorf("Free(relative) = %d, %v", got, err)
	}
}
