package testkit

import (
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

// AgentUser makes the agent's user (agentUID, files.AgentUID's address) one a test can act for:
// the test's own, or, run as root, nobody (65534), as on a box where root is not the agent. It
// returns that uid, the name a fix line gives it (its number when it has no name), and own,
// which gives a path to it (nothing to do when the test runs as it). *agentUID is restored when
// the test ends.
func AgentUser(tb testing.TB, agentUID *func() int) (uid int, name string, own func(path string)) {
	tb.Helper()
	prev := *agentUID
	tb.Cleanup(func() { *agentUID = prev })
	uid = os.Geteuid()
	own = func(string) {}
	if uid == 0 {
		uid = 65534
		*agentUID = func() int { return uid }
		own = func(p string) {
			if err := os.Lchown(p, uid, -1); err != nil {
				tb.Fatal(err)
			}
		}
	}
	name = strconv.Itoa(uid)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	return uid, name, own
}

// WriteFile writes content to path with mode (whatever the umask), making its directory.
func WriteFile(tb testing.TB, path, content string, mode os.FileMode) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		tb.Fatal(err)
	}
}

// Mode is the permission bits of path.
func Mode(tb testing.TB, path string) os.FileMode {
	tb.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return fi.Mode().Perm()
}

// CopyTree copies the directories (0755) and regular files (0644) under src to dst, passing
// each file's bytes through edit, when not nil, with the file's path relative to src.
func CopyTree(dst, src string, edit func(rel string, data []byte) ([]byte, error)) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if edit != nil {
			if raw, err = edit(rel, raw); err != nil {
				return err
			}
		}
		return os.WriteFile(out, raw, 0o644)
	})
}

// Golden checks got against the golden file at path. With update it writes got there instead
// (making its directory); rewrite is the command that does so, named when the file is missing
// or differs.
func Golden(tb testing.TB, path, got string, update bool, rewrite string) {
	tb.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (%s writes it)", err, rewrite)
	}
	if got != string(want) {
		tb.Errorf("%s differs (%s rewrites it):\n--- got\n%s\n--- want\n%s", path, rewrite, got, want)
	}
}
