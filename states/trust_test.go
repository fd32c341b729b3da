package states_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/machine/explain"
)

// tickErr runs one tick and returns its exit code and error text.
func (h *harness) tickErr() (int, string) {
	h.t.Helper()
	res := h.agent().Tick(context.Background())
	msg := ""
	if res.Err != nil {
		msg = res.Err.Error()
	}
	return res.Exit, msg
}

// bao.token replaced by a symlink to a root-only file: that file's content was sent as
// X-Vault-Token and as tenancy's Bearer. Now the tick exits 1 naming the path and the fix, and
// touches no network.
func TestSymlinkedTokenIsNeverSent(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	other := filepath.Join(h.dir, "root-only")
	if err := os.WriteFile(other, []byte("s.root-only-canary-Zq8\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok := h.cfg.TokenPath()
	if err := os.Remove(tok); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, tok); err != nil {
		t.Fatal(err)
	}
	before := h.sim.Counts(env)
	code, msg := h.tickErr()
	h.wantExit(code, 1)
	if !strings.Contains(msg, tok) || !strings.Contains(msg, "rm -- "+tok) {
		t.Errorf("error %q: want the path and the fix", msg)
	}
	if after := h.sim.Counts(env); after != before {
		t.Errorf("the tick went on the network: %+v → %+v", before, after)
	}
	// the record says what the evidence says: status, on the box or on a copy, shows the token
	// untrusted and why, never "present"
	if u := h.record().Token.Untrusted; !strings.Contains(u, tok) || !strings.Contains(u, "symlink") {
		t.Errorf("the record's token.untrusted %q: want the path and why", u)
	}
	s, err := explain.BuildStatusCopy(h.st)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	explain.WriteStatusText(&b, s)
	row := ""
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "token ") {
			row = l
		}
	}
	if s.Token.Present || strings.Contains(row, "present") || !strings.Contains(row, "not usable") || !strings.Contains(row, "symlink") {
		t.Errorf("status's token row %q (token %+v): the evidence says the file is an untrusted symlink", row, s.Token)
	}
}

// Token and grant files with mode 0644 (or group-writable) were used without a word.
func TestLooseTokenModeIsRefusedWithTheFix(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	tok := h.cfg.TokenPath()
	if err := os.Chmod(tok, 0o666); err != nil {
		t.Fatal(err)
	}
	code, msg := h.tickErr()
	h.wantExit(code, 1)
	if !strings.Contains(msg, "chmod go-rwx "+tok) {
		t.Errorf("error %q: want `chmod go-rwx %s`", msg, tok)
	}
	if u := h.record().Token.Untrusted; !strings.Contains(u, "group- or world-writable") {
		t.Errorf("the record's token.untrusted %q", u)
	}
	if err := os.Chmod(tok, 0o600); err != nil {
		t.Fatal(err)
	}
	h.wantExit(h.tick(), 0)
	if tk := h.record().Token; tk.Untrusted != "" || !tk.Present {
		t.Errorf("the file is trusted again, yet the record's token %+v", tk)
	}
}

// A bootstrap grant owned by another user is not used.
func TestForeignGrantIsRefusedWithTheFix(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root (the owner rule is covered in effects/files without it)")
	}
	h := newHarness(t)
	if err := os.Chown(h.cfg.BootstrapPath, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	code, msg := h.tickErr()
	h.wantExit(code, 1)
	if !strings.Contains(msg, "chown ") || !strings.Contains(msg, h.cfg.BootstrapPath) {
		t.Errorf("error %q: want `chown <agent>: %s`", msg, h.cfg.BootstrapPath)
	}
	if h.sim.Counts(env).Logins != 0 {
		t.Errorf("the foreign grant logged in")
	}
}

// A world-writable deploy_dir where another user planted a `releases` symlink: the release and
// its .env were written into that user's directory. Now nothing is written there and the tick
// names the fix.
func TestPlantedReleasesSymlinkIsNotWrittenThrough(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	if err := os.MkdirAll(h.cfg.DeployDir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(h.cfg.DeployDir, 0o777); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(h.dir, "theirs")
	if err := os.Mkdir(theirs, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(theirs, filepath.Join(h.cfg.DeployDir, "releases")); err != nil {
		t.Fatal(err)
	}
	code, msg := h.tickErr()
	h.wantExit(code, 1)
	if !strings.Contains(msg, h.cfg.DeployDir) {
		t.Errorf("error %q does not name %s", msg, h.cfg.DeployDir)
	}
	if ents, _ := os.ReadDir(theirs); len(ents) != 0 {
		t.Errorf("the release was written into the planted directory: %v", ents)
	}
	// the fix the error names, then the planted link removed: the apply goes through
	if err := os.Chmod(h.cfg.DeployDir, 0o700); err != nil {
		t.Fatal(err)
	}
	code, msg = h.tickErr()
	h.wantExit(code, 1)
	if !strings.Contains(msg, "rm -- "+filepath.Join(h.cfg.DeployDir, "releases")) {
		t.Errorf("error %q: want the planted link named", msg)
	}
	os.Remove(filepath.Join(h.cfg.DeployDir, "releases"))
	h.wantExit(h.tick(), 0)
	if ents, _ := os.ReadDir(theirs); len(ents) != 0 {
		t.Errorf("the release was written into the planted directory: %v", ents)
	}
}

// <deploy_dir>/resolved/ replaced by a symlink to a world-writable directory of another user's:
// the resolved model, which holds the secrets' values, was written there before the next compose
// call refused it, every tick, a lease spent. Now it is checked like deploy_dir before anything
// is leased or written: the tick names the path and the fix, and nothing lands in that directory.
func TestPlantedResolvedDirIsNotWrittenThrough(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	resolved := filepath.Join(h.cfg.DeployDir, "resolved")
	theirs := filepath.Join(h.dir, "theirs")
	if err := os.Mkdir(theirs, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(theirs, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(resolved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(theirs, resolved); err != nil {
		t.Fatal(err)
	}
	h.release("v2", nil)
	before := h.sim.Counts(env)
	code, msg := h.tickErr()
	h.wantExit(code, 1)
	if !strings.Contains(msg, "rm -- "+resolved) {
		t.Errorf("error %q: want the planted link and its fix named", msg)
	}
	if ents, _ := os.ReadDir(theirs); len(ents) != 0 {
		t.Errorf("the resolved model was written into the planted directory: %v", ents)
	}
	if after := h.sim.Counts(env); after.Leases != before.Leases {
		t.Errorf("a lease was spent: %d → %d", before.Leases, after.Leases)
	}
}
