package files_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/testkit"
)

func wantTrustError(t *testing.T, err error, fix string) {
	t.Helper()
	var te *files.TrustError
	if !errors.As(err, &te) {
		t.Fatalf("error %v, want a TrustError", err)
	}
	if !strings.Contains(err.Error(), te.Path) || !strings.Contains(te.Fix, fix) {
		t.Errorf("error %q: want the path and a fix with %q", err, fix)
	}
	// the agent's directories are 0700 and its own: a person's shell reaches them as root
	if !strings.HasPrefix(te.Fix, "sudo ") {
		t.Errorf("fix %q: want it run with sudo", te.Fix)
	}
}

func TestReadTrustedRefusesWhatItMustNotTrust(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "root-only")
	if err := os.WriteFile(secret, []byte("s.not-the-agents"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "bao.token")
	if err := os.WriteFile(good, []byte("s.token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := files.ReadTrusted(good, 100); err != nil || string(b) != "s.token\n" {
		t.Fatalf("a good file: %q, %v", b, err)
	}
	if _, err := files.ReadTrusted(filepath.Join(dir, "absent"), 100); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent: %v", err)
	}

	link := filepath.Join(dir, "link.token")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	b, err := files.ReadTrusted(link, 100)
	if len(b) != 0 {
		t.Errorf("a symlink was followed: read %q", b)
	}
	wantTrustError(t, err, "rm ")

	loose := filepath.Join(dir, "loose.token")
	if err := os.WriteFile(loose, []byte("s.x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o620, 0o602, 0o666} {
		if err := os.Chmod(loose, mode); err != nil {
			t.Fatal(err)
		}
		_, err := files.ReadTrusted(loose, 100)
		wantTrustError(t, err, "chmod go-rwx "+loose)
	}

	fifo := filepath.Join(dir, "fifo.token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = files.ReadTrusted(fifo, 100)
	wantTrustError(t, err, "rm ")
	_, err = files.ReadTrusted(dir, 100)
	wantTrustError(t, err, "rm ")

	// another owner: the agent's uid is made to differ from the file's
	defer func(f func() int) { files.AgentUID = f }(files.AgentUID)
	files.AgentUID = func() int { return os.Geteuid() + 4242 }
	_, err = files.ReadTrusted(good, 100)
	wantTrustError(t, err, "chown ")
	wantTrustError(t, files.CheckDir(dir), "chown ")
}

func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	if err := files.CheckDir(dir); err != nil {
		t.Fatalf("a good dir: %v", err)
	}
	if err := files.CheckDir(filepath.Join(dir, "absent")); err != nil {
		t.Errorf("an absent dir: %v", err)
	}
	open := filepath.Join(dir, "deploy")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	wantTrustError(t, files.CheckDir(open), "chmod go-rwx "+open)
	other := t.TempDir()
	link := filepath.Join(dir, "releases")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	wantTrustError(t, files.CheckDir(link), "rm ")
}

// WriteFile creates relative to its directory's descriptor and never through a symlink, in the
// last component or the directory's.
func TestWriteFileNeverThroughASymlink(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	target := filepath.Join(other, "victim")
	if err := os.Symlink(target, filepath.Join(dir, "file")); err != nil {
		t.Fatal(err)
	}
	if err := files.OS.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o600); err == nil {
		t.Errorf("wrote through a symlink")
	}
	if err := os.Symlink(other, filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	if err := files.OS.WriteFile(filepath.Join(dir, "sub", "f"), []byte("x"), 0o600); err == nil {
		t.Errorf("wrote through a symlinked directory")
	}
	if ents, _ := os.ReadDir(other); len(ents) != 0 {
		t.Errorf("files appeared in the symlinks' target: %v", ents)
	}
	p := filepath.Join(dir, "ok")
	if err := files.OS.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
}

// TestTrustFixRunsAsTheAgentsUser: a fix the agent's user may carry out runs as that user (its
// directories are 0700 and its own; a person needs no root there), with the path shell-quoted;
// run as printed (less the sudo: this test may do it), it leaves the file trusted or gone. A fix
// that user may not make (a chown, an entry of another's directory) runs as root.
func TestTrustFixRunsAsTheAgentsUser(t *testing.T) {
	uid, name, own := testkit.AgentUser(t, &files.AgentUID)
	asAgent := "sudo -u " + name + " "
	if strconv.Itoa(uid) == name {
		asAgent = "sudo -u '#" + name + "' "
	}
	dir := filepath.Join(t.TempDir(), "my state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	own(dir)
	quoted := "'" + dir + "/"
	run := func(what string, err error, want string) {
		t.Helper()
		var te *files.TrustError
		if !errors.As(err, &te) {
			t.Fatalf("%s: error %v, want a TrustError", what, err)
		}
		if !strings.HasPrefix(te.Fix, want) || !strings.Contains(te.Fix, quoted) {
			t.Fatalf("%s: fix %q, want it to begin %q and name the path quoted (%s…)", what, te.Fix, want, quoted)
		}
		if out, err := exec.Command("bash", "-c", strings.TrimPrefix(te.Fix, asAgent)).CombinedOutput(); err != nil {
			t.Fatalf("%s: %q as printed: %v %s", what, te.Fix, err, out)
		}
	}

	tok := filepath.Join(dir, "bao.token")
	if err := os.Symlink("/etc/hostname", tok); err != nil {
		t.Fatal(err)
	}
	_, err := files.ReadTrusted(tok, 100)
	run("a symlink", err, asAgent+"rm -- ")
	if _, err := os.Lstat(tok); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the symlink is still there: %v", err)
	}

	if err := syscall.Mkfifo(tok, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = files.ReadTrusted(tok, 100)
	run("a FIFO", err, asAgent+"rm -- ")
	if _, err := os.Lstat(tok); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the FIFO is still there: %v", err)
	}

	if err := os.WriteFile(tok, []byte("s.x"), 0o600); err != nil {
		t.Fatal(err)
	}
	own(tok)
	if err := os.Chmod(tok, 0o666); err != nil {
		t.Fatal(err)
	}
	_, err = files.ReadTrusted(tok, 100)
	run("a world-writable file", err, asAgent+"chmod go-rwx ")
	if _, err := files.ReadTrusted(tok, 100); err != nil {
		t.Errorf("after the fix: %v", err)
	}

	deploy := filepath.Join(dir, "env a")
	if err := os.Mkdir(deploy, 0o700); err != nil {
		t.Fatal(err)
	}
	own(deploy)
	if err := os.Chmod(deploy, 0o777); err != nil {
		t.Fatal(err)
	}
	run("a world-writable directory", files.CheckDir(deploy), asAgent+"chmod go-rwx ")
	if err := files.CheckDir(deploy); err != nil {
		t.Errorf("after the fix: %v", err)
	}

	// the agent's user is another still: the file and its directory are not its own
	files.AgentUID = func() int { return uid + 4242 }
	for what, err := range map[string]error{"another's file": func() error { _, err := files.ReadTrusted(tok, 100); return err }(), "another's directory": files.CheckDir(deploy)} {
		var te *files.TrustError
		if !errors.As(err, &te) || !strings.HasPrefix(te.Fix, "sudo chown ") || !strings.Contains(te.Fix, quoted) {
			t.Errorf("%s: %v, want sudo chown and the path quoted", what, err)
		}
	}
	if err := os.Remove(tok); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", tok); err != nil {
		t.Fatal(err)
	}
	var te *files.TrustError
	if _, err := files.ReadTrusted(tok, 100); !errors.As(err, &te) || !strings.HasPrefix(te.Fix, "sudo rm -- "+quoted) {
		t.Errorf("a symlink in a directory not the agent's user's: %v, want it removed as root", err)
	}
}
