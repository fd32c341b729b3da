package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// rootOwned lists the files under dir owned by root.
func rootOwned(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := os.Lstat(p); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == 0 {
				out = append(out, p)
			}
		}
		return nil
	})
	return out
}

// `sudo monky-deployd bootstrap --force` (or run, resume) on a box whose state_dir belongs to
// the agent's user left bao.token owned by root, and every timer tick then exited 1 with
// "permission denied". Run as root, a state-changing command now refuses before it touches
// anything and names the command to run instead; no root-owned file is left.
func TestRootIsRefusedWhereStateDirIsTheAgents(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root; TestWrongUserRefusedInProcess covers the refusal without it")
	}
	b := startBox(t)
	if err := os.MkdirAll(b.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	const agentUID = 65534
	_ = filepath.WalkDir(b.StateDir, func(p string, _ fs.DirEntry, _ error) error { return os.Lchown(p, agentUID, agentUID) })
	name := strconv.Itoa(agentUID)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	for _, args := range [][]string{{"bootstrap", "--force"}, {"run", "--once"}, {"resume"}} {
		_, e, code := b.agent(args...)
		want := "run it as the agent's user: sudo -u " + name + " monky-deployd --config " + b.Config() + " " + strings.Join(args, " ")
		if code != 1 || !strings.Contains(e, want) {
			t.Errorf("%v as root: exit %d, stderr %q; want exit 1 and %q", args, code, e, want)
		}
	}
	if files := rootOwned(t, b.StateDir); len(files) != 0 {
		t.Errorf("root-owned files left in state_dir: %v", files)
	}
	if c := b.Counts(); c.Logins != 0 || c.Checkins != 0 {
		t.Errorf("a refused command went on the network: %+v", c)
	}
}

// The same refusal without root: the process is taken for root, state_dir is this user's.
func TestWrongUserRefusedInProcess(t *testing.T) {
	uid := os.Geteuid()
	if uid == 0 {
		uid = 65534
	}
	defer func(f func() int) { geteuid = f }(geteuid)
	geteuid = func() int { return 0 }
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(state, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	testkit.WriteFile(t, cfgPath, "env_id: env-qa-02\nsite: cbs\ntransport: system\nstate_dir: "+state+"\ntenancy:\n  base_url: http://127.0.0.1:9\n", 0o600)
	for _, args := range [][]string{{"run", "--once"}, {"bootstrap", "--force"}, {"resume", "--now"}} {
		var out, errb bytes.Buffer
		code := run(append([]string{"monky-deployd", "--config", cfgPath}, args...), &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), "sudo -u ") || !strings.Contains(errb.String(), "monky-deployd --config "+cfgPath+" "+strings.Join(args, " ")) {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
	if ents, _ := os.ReadDir(state); len(ents) != 0 {
		t.Errorf("a refused command wrote into state_dir: %v", ents)
	}
}
