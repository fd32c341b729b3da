package states_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func releaseDirs(t *testing.T, h *harness) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(h.cfg.DeployDir, "releases"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func pruneNotes(t *testing.T, h *harness) []string {
	t.Helper()
	var out []string
	for _, e := range journal(t, h.st) {
		if e.Event == "prune" {
			out = append(out, e.Detail)
		}
	}
	return out
}

// Every successful apply removes the releases beyond keep_releases — without --prune, as the
// timer runs it — oldest first by when each was applied (not by the directory's time), never
// the current one; the journal says which.
func TestApplyPrunesOldReleasesWithoutThePruneFlag(t *testing.T) {
	h := newHarness(t)
	shas := map[string]string{}
	for _, n := range []string{"r1", "r2", "r3"} {
		shas[n] = h.apply(n)
	}
	if got := releaseDirs(t, h); len(got) != 3 {
		t.Fatalf("after 3 applies with keep_releases 3: %v", got)
	}
	if n := pruneNotes(t, h); len(n) != 0 {
		t.Fatalf("nothing to prune yet, but the journal says %v", n)
	}
	// r1's directory looks the newest on disk; it is still the oldest apply
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(h.cfg.DeployDir, "releases", shas["r1"]), future, future); err != nil {
		t.Fatal(err)
	}
	shas["r4"] = h.apply("r4")
	got := releaseDirs(t, h)
	want := []string{shas["r2"], shas["r3"], shas["r4"]}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("releases %v, want r2 r3 r4 (r1 was applied first)", got)
	}
	notes := pruneNotes(t, h)
	if len(notes) != 1 || !strings.Contains(notes[0], "removed 1 release(s) beyond keep_releases 3, oldest first: "+shas["r1"][:12]) {
		t.Fatalf("prune notes %q", notes)
	}
	cur, _ := os.Readlink(filepath.Join(h.cfg.DeployDir, "current"))
	if filepath.Base(cur) != shas["r4"] {
		t.Fatalf("current → %s", cur)
	}

	// the pruned release's resolved model (it holds the secrets' values) went with it
	if _, err := os.Stat(filepath.Join(h.cfg.DeployDir, "resolved", shas["r1"]+".yaml")); !os.IsNotExist(err) {
		t.Errorf("r1's resolved model outlives its release: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.DeployDir, "resolved", shas["r4"]+".yaml")); err != nil {
		t.Errorf("r4's resolved model: %v", err)
	}

	// keep_releases 1 keeps only the current release
	h.cfg.KeepReleases = 1
	shas["r5"] = h.apply("r5")
	if got := releaseDirs(t, h); !slices.Equal(got, []string{shas["r5"]}) {
		t.Fatalf("keep_releases 1: releases %v, want only r5", got)
	}
	for _, c := range h.composeCalls() {
		if strings.Contains(c, "image") {
			t.Fatalf("pruning without --prune touched images: %q", c)
		}
	}
}

// --prune also removes the images of the env's repositories that no kept release names —
// those of pruned releases included — and leaves every other image on the host alone.
func TestPruneFlagRemovesImagesNoKeptReleaseUses(t *testing.T) {
	h := newHarness(t)
	h.cfg.KeepReleases = 2
	knob := filepath.Join(h.dockerState, "images")
	if err := os.WriteFile(knob, []byte("postgres:16\nharbor.example/other/tool:r1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"r1", "r2", "r3"} {
		h.release(n, nil)
		// what the apply's pull brings (the fake's pull records nothing)
		f, err := os.OpenFile(knob, os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("harbor.example/monky/api:" + n + "\nharbor.example/monky/worker:" + n + "\n")
		f.Close()
		a := h.agent()
		a.Prune = true
		res := a.Tick(context.Background())
		h.clock.Advance(time.Minute)
		h.wantExit(res.Exit, 0)
	}
	b, err := os.ReadFile(filepath.Join(h.dockerState, "images"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(b))
	want := []string{"harbor.example/monky/api:r2", "harbor.example/monky/worker:r2", "harbor.example/monky/api:r3", "harbor.example/monky/worker:r3",
		"postgres:16", "harbor.example/other/tool:r1"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("images left %v, want %v", got, want)
	}
	notes := pruneNotes(t, h)
	last := notes[len(notes)-1]
	if !strings.Contains(last, "images: removed 2 no kept release uses") || !strings.Contains(last, "harbor.example/monky/api:r1") {
		t.Fatalf("prune note %q", last)
	}
	if !slices.ContainsFunc(h.composeCalls(), func(c string) bool { return strings.HasSuffix(c, "image prune -f") }) {
		t.Fatal("no docker image prune -f")
	}
}
