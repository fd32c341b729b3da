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
		if strings.Contains(c, "image rm") || strings.Contains(c, "image prune") {
			t.Fatalf("pruning without --prune removed an image the engine does not hold: %q", c)
		}
	}
}

// Every apply removes the images that only the releases it pruned named — never one a kept
// release names, one of another repository, or one of the env's repositories that no release
// named (that is --prune's) — and the journal says which and the bytes freed.
func TestEveryApplyRemovesTheImagesOnlyGoneReleasesNamed(t *testing.T) {
	h := newHarness(t)
	h.cfg.KeepReleases = 2
	knob := filepath.Join(h.dockerState, "images")
	if err := os.WriteFile(knob, []byte("postgres:16\nharbor.example/other/tool:r1\nharbor.example/monky/api:by-hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.dockerKnob("image-size", "1048576")
	for _, n := range []string{"r1", "r2", "r3"} {
		h.release(n, nil)
		f, err := os.OpenFile(knob, os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("harbor.example/monky/api:" + n + "\nharbor.example/monky/worker:" + n + "\n")
		f.Close()
		h.wantExit(h.tick(), 0)
	}
	b, err := os.ReadFile(knob)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(b))
	want := []string{"harbor.example/monky/api:r2", "harbor.example/monky/worker:r2", "harbor.example/monky/api:r3", "harbor.example/monky/worker:r3",
		"postgres:16", "harbor.example/other/tool:r1", "harbor.example/monky/api:by-hand"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("images left %v, want %v", got, want)
	}
	notes := pruneNotes(t, h)
	last := notes[len(notes)-1]
	if !strings.Contains(last, "images: removed 2 only releases no longer kept named: harbor.example/monky/api:r1, harbor.example/monky/worker:r1 (2.00 MiB (2097152 bytes) freed)") {
		t.Fatalf("prune note %q", last)
	}
	if slices.ContainsFunc(h.composeCalls(), func(c string) bool { return strings.Contains(c, "image prune") }) {
		t.Fatal("docker image prune ran without --prune")
	}
}

// reclaimDisk is image storage whose free space grows by a GiB for each image of the env's
// repositories the docker stub no longer holds of those it held at first.
type reclaimDisk struct {
	knob  string
	first int
	base  uint64
}

func (d reclaimDisk) Free(string) (uint64, error) {
	b, err := os.ReadFile(d.knob)
	if err != nil {
		return 0, err
	}
	return d.base + uint64(d.first-strings.Count(string(b), "harbor.example/monky/"))<<30, nil
}

// Before refusing DISK_INSUFFICIENT the agent reclaims the images no kept release names and
// measures again: freed enough, it applies; the journal says what it removed.
func TestDiskInsufficientReclaimsImagesFirst(t *testing.T) {
	h := newHarness(t)
	h.apply("r1")
	knob := filepath.Join(h.dockerState, "images")
	if err := os.WriteFile(knob, []byte("harbor.example/monky/api:r1\nharbor.example/monky/worker:r1\nharbor.example/monky/api:old\nharbor.example/monky/worker:old\npostgres:16\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sha := h.release("r2", nil)
	a := h.agent()
	a.Fx.Disk = reclaimDisk{knob: knob, first: 4, base: 1 << 30} // 1 GiB free; the default headroom asks 2
	res := a.Tick(context.Background())
	h.wantExit(res.Exit, 0)
	if rec := h.record(); rec.AppliedSha != sha {
		t.Fatalf("applied %s, want r2 after the reclaim (%v)", rec.AppliedSha, res.Err)
	}
	notes := pruneNotes(t, h)
	if len(notes) == 0 || !strings.Contains(notes[0], "before refusing DISK_INSUFFICIENT: images: removed 2 no kept release names: harbor.example/monky/api:old, harbor.example/monky/worker:old") {
		t.Fatalf("prune notes %q", notes)
	}
	b, _ := os.ReadFile(knob)
	if !strings.Contains(string(b), "api:r1") || !strings.Contains(string(b), "postgres:16") {
		t.Errorf("the reclaim removed a kept release's or another repository's image: %q", b)
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
