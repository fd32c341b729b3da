package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Read-only commands never create a file. `status` took the tick lock to see whether a tick
// ran, creating the lock file when there was none: run as root on a box with no lock file, it
// left a root-owned lock on which every later tick failed.
func TestReadOnlyCommandsCreateNoFile(t *testing.T) {
	b := startBox(t)
	b.Desire("v1")
	b.tick(0)
	if err := os.Remove(filepath.Join(b.StateDir, "lock")); err != nil {
		t.Fatal(err)
	}
	before, _ := b.snapshot()
	for _, args := range [][]string{{"status"}, {"status", "--json"}, {"status", "--quiet"}, {"explain"}, {"explain", "--json"}, {"version"}} {
		if _, e, c := b.agent(args...); c > 1 {
			t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), c, e)
		}
	}
	after, _ := b.snapshot()
	if d := diffFiles(before, after); len(d) > 0 {
		t.Errorf("read-only commands changed the box:\n%s", strings.Join(d, "\n"))
	}
}
