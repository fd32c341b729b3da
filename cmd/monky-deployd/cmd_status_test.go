package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// statusBox writes a config and a state file whose last tick, converged, ran at last.
func statusBox(t *testing.T, last time.Time, extra string) (cfg, stateDir string) {
	t.Helper()
	dir := t.TempDir()
	stateDir = filepath.Join(dir, "state")
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg = filepath.Join(dir, "config.yaml")
	testkit.WriteFile(t, cfg, "env_id: env-qa-02\nsite: cbs\ntransport: system\nstate_dir: "+stateDir+"\n"+extra, 0o600)
	st, err := store.OpenBolt(filepath.Join(stateDir, "state.db"), store.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exit := 0
	sha := strings.Repeat("a", 64)
	if err := st.Update(func(tx store.Tx) error {
		if err := tx.PutTick(store.TickSummary{Tick: 4, StartedAt: last, EndedAt: last, Exit: &exit, Action: "none", DesiredSha: sha, AppliedSha: sha}); err != nil {
			return err
		}
		return tx.PutRecord(store.Record{EnvID: "env-qa-02", State: string(machine.Reported), Tick: 4, Action: "none", AppliedSha: sha, DesiredSha: sha,
			LastTickAt: last, LastCheckinAt: last, Token: store.TokenMeta{Present: true, Source: "lease", ExpiresAt: last.Add(20 * time.Hour)}})
	}); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, filepath.Join(stateDir, "bao.token"), "hvs.x\n", 0o600)
	return cfg, stateDir
}

// TestStatusOfAStaleBox: a box whose timer stopped (its last tick ten minutes old, past
// stale_after_s) needs a person on every form of status, which names the timer and the last
// tick's time; a tick holding the lock is never stale; stale_after_s comes from the config.
func TestStatusOfAStaleBox(t *testing.T) {
	last := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Second)
	cfg, stateDir := statusBox(t, last, "")
	status := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(append([]string{"monky-deployd", "--config", cfg, "status"}, args...), &out, &errb)
		return code, out.String()
	}
	code, out := status()
	if code != 1 || !strings.Contains(out, "systemctl status monky-deployd.timer") || !strings.Contains(out, machine.Stamp(last)) ||
		!strings.Contains(out, "needs a person (TICKS_STOPPED)") {
		t.Errorf("status of a stale box: exit %d\n%s", code, out)
	}
	if code, out := status("--quiet"); code != 1 || out != "" {
		t.Errorf("status --quiet: exit %d, %q", code, out)
	}
	code, out = status("--json")
	var doc struct {
		Verdict string   `json:"verdict"`
		Codes   []string `json:"codes"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 1 || doc.Verdict != "needs_person" || len(doc.Codes) != 1 || doc.Codes[0] != "TICKS_STOPPED" {
		t.Errorf("status --json: exit %d, %+v (%v)", code, doc, err)
	}

	// a tick in flight holds the lock: not stale
	f, err := os.OpenFile(filepath.Join(stateDir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if code, out := status(); code != 0 || strings.Contains(out, "TICKS_STOPPED") {
		t.Errorf("status while a tick holds the lock: exit %d\n%s", code, out)
	}
	f.Close()

	// the box's own stale_after_s
	cfg, _ = statusBox(t, last, "stale_after_s: 900\n")
	if code, out := status(); code != 0 || !strings.Contains(out, "verdict        converged") {
		t.Errorf("status with stale_after_s 900: exit %d\n%s", code, out)
	}
}

// TestStatusOfAnUntrustedTokenFile: a bao.token that is a symlink is not read by any tick (the
// journal says it is untrusted); status must not say "token present (lease)" beside it, on
// either form.
func TestStatusOfAnUntrustedTokenFile(t *testing.T) {
	last := time.Now().Add(-30 * time.Second).UTC().Truncate(time.Second)
	cfg, stateDir := statusBox(t, last, "")
	tok := filepath.Join(stateDir, "bao.token")
	elsewhere := filepath.Join(t.TempDir(), "token")
	testkit.WriteFile(t, elsewhere, "hvs.x\n", 0o600)
	if err := os.Remove(tok); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, tok); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	run([]string{"monky-deployd", "--config", cfg, "status"}, &out, &errb)
	if strings.Contains(out.String(), "present (lease)") || !strings.Contains(out.String(), tok+" is a symlink") {
		t.Errorf("status:\n%s", out.String())
	}
	out.Reset()
	run([]string{"monky-deployd", "--config", cfg, "status", "--json"}, &out, &errb)
	var s struct {
		Token struct {
			Present   bool   `json:"present"`
			Untrusted string `json:"untrusted"`
		} `json:"token"`
	}
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if s.Token.Present || !strings.Contains(s.Token.Untrusted, "symlink") {
		t.Errorf("status --json token %+v", s.Token)
	}
}
