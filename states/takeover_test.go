package states_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects/bao"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/store"
	"github.com/tikali/monky-deployd/test/sim"
	"github.com/tikali/monky-deployd/transport"
)

// The 0.1.9 box of testdata/takeover: env-demo-01 with the demo backend's v1 and v2 applied,
// current → v2.
const (
	demoEnv  = "env-demo-01"
	fixture  = "../testdata/takeover/box-0.1.9"
	fxV1     = "3fa515dfdac20a214d2a550950d4f4f82d16d4f6290f713adce13cdf7ea73803"
	fxV2     = "b14f6e29f20b7e8be6862087b4725720d7ac719bda0303b8a3d1c6f360a3db29"
	fxTokens = "var/lib/monky-deployd"
)

// takeoverHarness is a harness whose kit is for env-demo-01 with the demo releases served,
// v2 desired, and whose state_dir holds a copy of the 0.1.9 box (with a token the simulator
// issued in bao.token, as 0.1.9 would have stored it). No state.db exists yet.
func takeoverHarness(t *testing.T, mutate func(stateDir string)) *harness {
	t.Helper()
	h := newHarness(t)
	h.sim.AddEnv(demoEnv)
	if _, err := h.sim.LoadReleasesDir(demoEnv, "../testdata/demo"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sim.SetDesiredRelease(demoEnv, "v2"); err != nil {
		t.Fatal(err)
	}
	h.kit = filepath.Join(h.dir, "kit-demo")
	stateDir := filepath.Join(h.dir, "box")
	if err := h.sim.WriteKit(h.kit, sim.Kit{EnvID: demoEnv, TenancyURL: h.ten.URL, BaoURL: h.bao.URL,
		StateDir: stateDir, DockerBin: h.docker}); err != nil {
		t.Fatal(err)
	}
	copyBox(t, filepath.Join(fixture, fxTokens), stateDir)
	if err := os.Symlink("releases/"+fxV2, filepath.Join(stateDir, demoEnv, "current")); err != nil {
		t.Fatal(err)
	}
	// the kit's grant was consumed by 0.1.9's first login long ago; its token is what remains
	grant, err := h.sim.MintGrant(demoEnv, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	d, err := transport.New(transport.FromConfig(h.cfg)) // the first kit's: transport system
	if err != nil {
		t.Fatal(err)
	}
	hc, err := transport.HTTPClient(d, "127.0.0.1", "", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	bc, err := bao.New(h.bao.URL, hc, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := bc.Login(context.Background(), "jwt-tenancy", "see-env", grant)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stateDir, "bao.token"), []byte(tok.Value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(stateDir, "bao.token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(h.kit, "bootstrap.jwt")); err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(stateDir)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "state.db")); err == nil {
		t.Fatal("the copied box has a state.db")
	}
	h.reload()
	if h.cfg.StateDir != stateDir || h.cfg.DeployDir != filepath.Join(stateDir, demoEnv) {
		t.Fatalf("kit state_dir %s deploy_dir %s", h.cfg.StateDir, h.cfg.DeployDir)
	}
	// 0.1.9 started v2's services: the fake docker knows them as running
	up := exec.Command(h.docker, "compose", "-p", h.cfg.ComposeProject, "-f", "compose.yaml", "up", "-d", "--remove-orphans")
	up.Dir = filepath.Join(stateDir, demoEnv, "current")
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("seed the running services: %v %s", err, out)
	}
	_ = os.Remove(h.dockerLog)
	return h
}

// copyBox copies the fixture's regular files and directories (not `current`: the caller
// makes it as 0.1.9 did), bao.token 0600 as 0.1.9 wrote it.
func copyBox(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o700)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if d.Name() == "bao.token" || d.Name() == ".env" {
				mode = 0o600
			}
			return os.WriteFile(dst, b, mode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func journal(t *testing.T, st store.Store) []store.Entry {
	t.Helper()
	var out []store.Entry
	if err := st.View(func(tx store.Tx) error {
		return tx.AllEntries(func(e store.Entry) error { out = append(out, e); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func history(t *testing.T, st store.Store) []string {
	t.Helper()
	var out []string
	if err := st.View(func(tx store.Tx) error {
		h, err := tx.AppliedHistory()
		for _, a := range h {
			out = append(out, a.Sha)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A box upgraded in place from 0.1.9: the first tick imports its token, applied sha and
// releases, says so first in the journal, and — converged — only heartbeats: no lease, no
// login, no compose pull or up. state.json is left byte for byte.
func TestTakeoverOfA019BoxHeartbeats(t *testing.T) {
	h := takeoverHarness(t, nil)
	legacy := filepath.Join(h.cfg.StateDir, "state.json")
	before, err := os.ReadFile(legacy)
	if err != nil {
		t.Fatal(err)
	}
	infoBefore, _ := os.Stat(legacy)
	c0 := h.sim.Counts(demoEnv)

	h.wantExit(h.tick(), 0)

	c1 := h.sim.Counts(demoEnv)
	if c1.Leases != c0.Leases || c1.LeaseAsks != c0.LeaseAsks || c1.Logins != c0.Logins || c1.BundleFetches != c0.BundleFetches || c1.KVReads != c0.KVReads {
		t.Fatalf("a converged taken-over box leased, logged in, fetched or read: before %+v after %+v", c0, c1)
	}
	for _, c := range h.composeCalls() {
		if strings.Contains(c, " pull") || strings.Contains(c, " up ") || strings.Contains(c, " down") {
			t.Fatalf("a converged taken-over box ran %q", c)
		}
	}
	reps := h.sim.Reports(demoEnv)
	if len(reps) != 1 || reps[0].Result != "applied" || reps[0].Sha != fxV2 {
		t.Fatalf("reports %+v, want one heartbeat for v2", reps)
	}
	rec := h.record()
	if rec.AppliedSha != fxV2 || rec.Token.Source != store.SourceLease || !rec.Token.Present {
		t.Fatalf("record: applied %s token %+v", rec.AppliedSha, rec.Token)
	}
	if got := history(t, h.st); strings.Join(got, ",") != fxV1+","+fxV2 {
		t.Fatalf("applied history %v, want v1 then v2", got)
	}
	j := journal(t, h.st)
	if len(j) == 0 || j[0].Event != "takeover" {
		t.Fatalf("first journal entry %+v, want the takeover", j)
	}
	for _, w := range []string{"token from bao.token (source lease from state.json)", "applied sha " + fxV2[:12] + " from state.json",
		"2 release(s) as applied before: " + fxV1[:12] + ", " + fxV2[:12], "state.json left as it was"} {
		if !strings.Contains(j[0].Detail, w) {
			t.Errorf("takeover entry %q lacks %q", j[0].Detail, w)
		}
	}
	after, err := os.ReadFile(legacy)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("state.json changed: %v", err)
	}
	if infoAfter, _ := os.Stat(legacy); !infoAfter.ModTime().Equal(infoBefore.ModTime()) || infoAfter.Mode() != infoBefore.Mode() {
		t.Fatal("state.json's mtime or mode changed")
	}

	// the second tick imports nothing again
	h.wantExit(h.tick(), 0)
	n := 0
	for _, e := range journal(t, h.st) {
		if e.Event == "takeover" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d takeover entries after two ticks, want 1", n)
	}
}

// Every release 0.1.x applied counts as applied before: tenancy asking for one again is a
// rollback, refused before any lease (0.1.x's `allow_rollback` rule).
func TestTakeoverRefusesARollbackToAnImportedRelease(t *testing.T) {
	h := takeoverHarness(t, nil)
	if _, err := h.sim.SetDesiredRelease(demoEnv, "v1"); err != nil {
		t.Fatal(err)
	}
	h.wantExit(h.tick(), 1)
	rec := h.record()
	if rec.Refusal == nil || rec.Refusal.Code != "ROLLBACK_REFUSED" {
		t.Fatalf("refusal %+v, want ROLLBACK_REFUSED", rec.Refusal)
	}
	if c := h.sim.Counts(demoEnv); c.LeaseAsks != 0 {
		t.Fatalf("a refused rollback asked for a lease: %+v", c)
	}
}

// A state.json that cannot be read is reported in the takeover entry and ignored: the applied
// sha comes from `current`, the token is still imported, the tick heartbeats.
func TestTakeoverIgnoresAMalformedStateJSON(t *testing.T) {
	for name, body := range map[string]string{
		"truncated":  `{"applied_sha": "b14f6e`,
		"not-object": `["b14f6e29"]`,
		"bad-sha":    `{"applied_sha": "v2", "token": {"source": "approle"}}`,
		"empty":      ``,
	} {
		t.Run(name, func(t *testing.T) {
			h := takeoverHarness(t, func(dir string) {
				if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			})
			h.wantExit(h.tick(), 0)
			rec := h.record()
			if rec.AppliedSha != fxV2 || !rec.Token.Present {
				t.Fatalf("applied %q token %+v", rec.AppliedSha, rec.Token)
			}
			j := journal(t, h.st)
			if j[0].Event != "takeover" || !strings.Contains(j[0].Detail, "applied sha "+fxV2[:12]+" from current") || !strings.Contains(j[0].Detail, "ignored: state.json") {
				t.Fatalf("takeover entry %q", j[0].Detail)
			}
			if got, _ := os.ReadFile(filepath.Join(h.cfg.StateDir, "state.json")); string(got) != body {
				t.Fatal("state.json was changed")
			}
			if c := h.sim.Counts(demoEnv); c.LeaseAsks != 0 || c.Logins != 1 {
				t.Fatalf("counts %+v: want no lease and only the fixture's own login", c)
			}
		})
	}
}

// A new box (no 0.1.x files) has nothing to take over: no takeover entry.
func TestNoTakeoverOnANewBox(t *testing.T) {
	h := newHarness(t)
	h.apply("r1")
	for _, e := range journal(t, h.st) {
		if e.Event == "takeover" {
			t.Fatalf("a new box journaled a takeover: %+v", e)
		}
	}
}

// The fixture's releases are the demo backend as the simulator serves it for env-demo-01,
// so a tick against the simulator finds the box converged.
func TestTakeoverFixtureMatchesTheDemo(t *testing.T) {
	s, err := sim.New(sim.Options{Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	s.AddEnv(demoEnv)
	shas, err := s.LoadReleasesDir(demoEnv, "../testdata/demo")
	if err != nil {
		t.Fatal(err)
	}
	if shas["v1"] != fxV1 || shas["v2"] != fxV2 {
		t.Fatalf("the demo's shas are now %v: rebuild testdata/takeover's releases (see its README)", shas)
	}
	for _, sha := range []string{fxV1, fxV2} {
		files, err := sim.ReadReleaseDir(filepath.Join(fixture, fxTokens, demoEnv, "releases", sha))
		if err != nil {
			t.Fatal(err)
		}
		delete(files, ".env")
		if got := bundle.Sha(files); got != sha {
			t.Fatalf("testdata/takeover's releases/%s holds a bundle whose sha is %s: rebuild it (see its README)", sha[:12], got[:12])
		}
	}
	if b, err := os.ReadFile(filepath.Join(fixture, fxTokens, "state.json")); err != nil || !strings.Contains(string(b), `"applied_sha": "`+fxV2+`"`) {
		t.Fatalf("state.json: %v", err)
	}
}
