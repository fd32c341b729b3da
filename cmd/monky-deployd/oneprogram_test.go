package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// The three faults that only showed while a lighter build handed ticks to the complete agent,
// each asserted on the one program the package ships (TestMain builds it with `make agent`).

// A re-run install kit: tenancy refuses the token (401) while a fresh bootstrap.jwt is on disk.
// The tick logs in with the fresh grant, checks in again and ends converged — never Blocked.
func TestFreshGrantAfterA401LogsInWithinTheTick(t *testing.T) {
	b := startBox(t)
	b.Desire("v1")
	b.tick(0)
	before := b.Counts()

	// the kit re-revealed: the box's token is superseded, its grant file replaced by the new one
	other := filepath.Join(b.Dir, "other-kit")
	b.Sim("reveal", "--kit", other)
	grant, err := os.ReadFile(filepath.Join(other, "bootstrap.jwt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.Kit, "bootstrap.jwt"), grant, 0o600); err != nil {
		t.Fatal(err)
	}

	e := b.tick(0)
	after := b.Counts()
	if after.Logins != before.Logins+1 {
		t.Errorf("logins %d → %d: want one login with the fresh grant in the tick; stderr:\n%s", before.Logins, after.Logins, e)
	}
	if d := b.explainJSON(); d.State == "Blocked" || d.Next != "converged" {
		t.Errorf("after the fresh grant: state %s, next %q; want converged", d.State, d.Next)
	}
	if _, err := os.Stat(filepath.Join(b.Kit, "bootstrap.jwt")); err == nil {
		if raw, _ := os.ReadFile(filepath.Join(b.Kit, "bootstrap.jwt")); len(strings.TrimSpace(string(raw))) > 0 {
			t.Error("the used grant is still on disk")
		}
	}
	// and the next tick is a plain heartbeat on the new token
	b.tick(0)
	if got := b.Counts().Logins; got != after.Logins {
		t.Errorf("logins %d → %d on the heartbeat after", after.Logins, got)
	}
}

// keep_releases keeps the newest releases by the order they were applied — the journal's — and
// never by the directories' times.
func TestPruneKeepsTheNewestReleasesInApplyOrder(t *testing.T) {
	rel := filepath.Join(t.TempDir(), "releases")
	for _, n := range []string{"v1", "v2"} {
		if err := testkit.CopyTree(filepath.Join(rel, n), filepath.Join("../../testdata/demo", n), nil); err != nil {
			t.Fatal(err)
		}
	}
	// v3: v2 with one more line in its compose file (another sha)
	if err := testkit.CopyTree(filepath.Join(rel, "v3"), "../../testdata/demo/v2", func(name string, raw []byte) ([]byte, error) {
		if name == "compose.yaml" {
			return append(raw, []byte("# v3\n")...), nil
		}
		return raw, nil
	}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../testdata/demo/secrets.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rel, "secrets.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	b := &box{testkit.StartBox(t, testkit.BoxOptions{Env: demoEnv, Releases: rel})}
	b.AppendConfig("keep_releases: 2\n")
	shas := b.ReleaseShas()
	releases := filepath.Join(b.StateDir, demoEnv, "releases")

	for _, n := range []string{"v1", "v2"} {
		b.Desire(n)
		b.tick(0)
	}
	// v1's directory looks the newest on disk, v2's the oldest: the order of the applies stands
	future, past := time.Now().Add(time.Hour), time.Now().Add(-24*time.Hour)
	if err := os.Chtimes(filepath.Join(releases, shas["v1"]), future, future); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(releases, shas["v2"]), past, past); err != nil {
		t.Fatal(err)
	}
	b.Desire("v3")
	b.tick(0)

	ents, err := os.ReadDir(releases)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	want := []string{shas["v2"], shas["v3"]}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("releases after v1, v2, v3 with keep_releases 2: %v; want v2 %.12s and v3 %.12s", got, shas["v2"], shas["v3"])
	}
	if o, _, _ := b.agent("explain", "-n", "1"); !strings.Contains(o, "removed 1 release(s) beyond keep_releases 2, oldest first: "+shas["v1"][:12]) {
		t.Errorf("explain does not say v1 was pruned:\n%s", o)
	}
}

// While a refused sha is remembered, every answered check-in still moves last_checkin_at and
// desired_sha is tenancy's answer, on status, explain and the metrics alike.
func TestARememberedRefusalShowsTheDesiredShaAndFreshCheckins(t *testing.T) {
	b := startBox(t)
	prom := b.metricsFile()
	shas := b.ReleaseShas()
	b.Desire("v1")
	b.tick(0)
	b.Desire("v2")
	b.tick(0)
	b.Desire("v1") // a rollback v1's bundle does not allow
	b.tick(1)

	type statusDoc struct {
		DesiredSha    string    `json:"desired_sha"`
		AppliedSha    string    `json:"applied_sha"`
		LastCheckinAt time.Time `json:"last_checkin_at"`
	}
	status := func() statusDoc {
		t.Helper()
		o, e, _ := b.agent("status", "--json")
		var d statusDoc
		if err := json.Unmarshal([]byte(o), &d); err != nil {
			t.Fatalf("status --json: %v\n%s%s", err, o, e)
		}
		return d
	}
	first := status()
	for i := range 2 {
		time.Sleep(20 * time.Millisecond) // two check-ins never share an instant
		e := b.tick(1)
		if !strings.Contains(e, "ROLLBACK_REFUSED") {
			t.Fatalf("remembered refusal %d: stderr does not name it:\n%s", i+1, e)
		}
		s := status()
		if s.DesiredSha != shas["v1"] || s.AppliedSha != shas["v2"] {
			t.Errorf("remembered refusal %d: status desired %.12s applied %.12s; want desired v1 %.12s, applied v2 %.12s",
				i+1, s.DesiredSha, s.AppliedSha, shas["v1"], shas["v2"])
		}
		if !s.LastCheckinAt.After(first.LastCheckinAt) {
			t.Errorf("remembered refusal %d: last_checkin_at %v did not move past %v", i+1, s.LastCheckinAt, first.LastCheckinAt)
		}
		first = s
	}
	var ex struct {
		Ticks []struct {
			DesiredSha string `json:"desired_sha"`
		} `json:"ticks"`
	}
	o, _, _ := b.agent("explain", "--json", "-n", "1")
	if err := json.Unmarshal([]byte(o), &ex); err != nil || len(ex.Ticks) != 1 || ex.Ticks[0].DesiredSha != shas["v1"] {
		t.Errorf("explain --json's last tick: %s (err %v); want desired_sha v1 %.12s", o, err, shas["v1"])
	}
	metrics, err := os.ReadFile(prom)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(strings.Split(string(metrics), "\n"), func(l string) bool {
		return strings.HasPrefix(l, "monky_deployd_sha_info{") && strings.Contains(l, `kind="desired"`) && strings.Contains(l, `sha="`+shas["v1"]+`"`)
	}) {
		t.Errorf("the metrics do not show v1 %.12s as desired:\n%s", shas["v1"], metrics)
	}
}
