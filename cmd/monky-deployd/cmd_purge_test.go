package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tikali/monky-deployd/internal/config"
)

// purge revokes the box's token at OpenBao (the simulator counts the revoke-self), deletes it,
// and says what stays: the deploy directory, its files holding secret values, the running
// containers, and the one command that removes them. With OpenBao gone it deletes the token
// and says it was not revoked.
func TestPurgeRevokesTheTokenAndSaysWhatStays(t *testing.T) {
	b := startBox(t)
	b.Desire("v1")
	b.tick(0)
	token := filepath.Join(b.StateDir, "bao.token")
	if _, err := os.Stat(token); err != nil {
		t.Fatalf("no token after the first tick: %v", err)
	}
	before := b.Counts().Revocations
	out, errb, code := b.agent("purge")
	if code != 0 {
		t.Fatalf("purge: exit %d\n%s%s", code, out, errb)
	}
	if got := b.Counts().Revocations; got != before+1 {
		t.Errorf("revocations at OpenBao %d → %d, want one revoke-self", before, got)
	}
	if _, err := os.Stat(token); !os.IsNotExist(err) {
		t.Errorf("the token is still on disk: %v", err)
	}
	deploy := filepath.Join(b.StateDir, b.Env)
	for _, w := range []string{
		"token: revoked at OpenBao (auth/token/revoke-self), then deleted: " + token,
		"left: " + deploy + " (the deploy directory",
		"file(s) holding secret values: ",
		"/.env",
		"/resolved/",
		"running container(s) of project monky-" + b.Env,
		"to remove it all: cd " + deploy + "/current && sudo docker compose -p monky-" + b.Env + " down && cd / && sudo rm -rf " + deploy,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("purge does not say %q:\n%s", w, out)
		}
	}

	// OpenBao does not answer: the token is deleted, and purge says it was not revoked
	if err := os.WriteFile(token, []byte("hvs.a-token-of-this-box\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.Stop()
	out, _, code = b.agent("purge", "--timeout", "3s")
	if code != 0 || !strings.Contains(out, "token: NOT revoked (") || !strings.Contains(out, "stays valid at OpenBao") {
		t.Errorf("purge with OpenBao gone: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(token); !os.IsNotExist(err) {
		t.Errorf("the token is still on disk: %v", err)
	}
}

// purge (run as root by dpkg --purge) reads bao.token the way the tick trusts it: a symlink is
// never followed (the file it names would go to OpenBao as the token), a FIFO never blocks it,
// and neither is sent; each is named.
func TestPurgeTrustsNoTokenLink(t *testing.T) {
	b := startBox(t)
	b.Desire("v1")
	b.tick(0)
	token := filepath.Join(b.StateDir, "bao.token")
	secret := filepath.Join(t.TempDir(), "root-only")
	if err := os.WriteFile(secret, []byte("not-a-token-but-a-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, plant := range map[string]func() error{
		"symlink": func() error { return os.Symlink(secret, token) },
		"fifo":    func() error { return syscall.Mkfifo(token, 0o600) },
	} {
		os.Remove(token)
		if err := plant(); err != nil {
			t.Fatal(err)
		}
		before := b.Counts().Revocations
		out, errb, code := b.agent("purge", "--timeout", "5s")
		if code != 0 || !strings.Contains(out, "token: NOT revoked (") {
			t.Errorf("%s: exit %d\n%s%s", name, code, out, errb)
		}
		want := map[string]string{"symlink": "is a symlink", "fifo": "is not a regular file"}[name]
		if !strings.Contains(out, want) {
			t.Errorf("%s: purge does not say %q:\n%s", name, want, out)
		}
		if got := b.Counts().Revocations; got != before {
			t.Errorf("%s: a revoke-self was sent (%d → %d)", name, before, got)
		}
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "not-a-token-but-a-secret\n" {
		t.Errorf("the link's target was touched: %q %v", b, err)
	}
}

// The command purge prints to remove what stays is one a person can paste: a deploy directory
// with a space is one word, not two directories for rm -rf. Run as printed (sudo and docker
// stand-ins that record their calls), it removes that directory and nothing beside it.
func TestPurgeRemovalLineIsQuoted(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "srv", "monky deploy")
	decoy := filepath.Join(root, "srv", "monky") // what `rm -rf /srv/monky deploy` would take
	for _, d := range []string{filepath.Join(dir, "current"), decoy} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &config.Config{DeployDir: dir, ComposeProject: "monky-env-qa-02", DockerBin: "monky-no-such-docker"}
	lines := leftBehind(context.Background(), cfg)
	last := lines[len(lines)-1]
	want := "cd '" + dir + "/current' && sudo docker compose -p monky-env-qa-02 down && cd / && sudo rm -rf '" + dir + "'"
	if !strings.Contains(last, want) {
		t.Fatalf("removal line %q, want it to hold %q", last, want)
	}
	line, ok := strings.CutPrefix(last, "to remove it all: ")
	if !ok {
		t.Fatalf("removal line %q does not start with its words", last)
	}
	bin := filepath.Join(root, "bin")
	calls := filepath.Join(root, "calls")
	stubs := map[string]string{
		"sudo":   "#!/bin/sh\nexec \"$@\"\n",
		"docker": "#!/bin/sh\necho \"docker $* in $PWD\" >>'" + calls + "'\n",
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "-c", line)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the line as printed: %v: %s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the deploy directory is still there (%v)", err)
	}
	if _, err := os.Stat(decoy); err != nil {
		t.Errorf("the directory beside it was removed: %v", err)
	}
	if got, _ := os.ReadFile(calls); !strings.Contains(string(got), "docker compose -p monky-env-qa-02 down in "+dir+"/current") {
		t.Errorf("compose down ran as %q, want in %s/current", got, dir)
	}
}
