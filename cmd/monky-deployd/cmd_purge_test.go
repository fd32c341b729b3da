package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// purge revokes the box's token at OpenBao (the simulator counts the revoke-self), deletes it,
// and says what stays: the deploy directory, its files holding secret values, the running
// containers, and the one command that removes them. With OpenBao gone it deletes the token
// and says it was not revoked.
func TestPurgeRevokesTheTokenAndSaysWhatStays(t *testing.T) {
	b := startBox(t)
	b.Sim("desire", "--release", "v1")
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
