package states_test

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// bundleFile is where the agent keeps sha's verified bundle while its apply retries.
func (h *harness) bundleFile(sha string) string {
	return filepath.Join(h.cfg.StateDir, "bundles", sha+".bundle")
}

// An OpenBao outage of three ticks in the middle of an apply costs one bundle fetch: the
// verified bundle is kept by its sha under state_dir, read from disk and verified again while
// the apply retries, and dropped once the sha is applied.
func TestAStuckApplyFetchesOnce(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	before := h.sim.Counts(env).BundleFetches
	sha := h.release("v2", nil)
	h.sim.Fail(simFail("/v1/monky/data/", 503, "", "")) // OpenBao's KV answers 503
	for i := 0; i < 3; i++ {
		h.wantExit(h.tick(), 75)
	}
	if got := h.sim.Counts(env).BundleFetches - before; got != 1 {
		t.Errorf("%d bundle fetches over three ticks of an OpenBao outage, want 1", got)
	}
	if m := testkit.Mode(t, h.bundleFile(sha)); m != 0o600 {
		t.Errorf("kept bundle mode %o, want 600", m)
	}
	if m := testkit.Mode(t, filepath.Dir(h.bundleFile(sha))); m != 0o700 {
		t.Errorf("bundles dir mode %o, want 700", m)
	}
	h.sim.ClearFails()
	h.wantConverged("OpenBao back")
	if got := h.sim.Counts(env).BundleFetches - before; got != 1 {
		t.Errorf("%d bundle fetches in all, want 1: the apply read the kept bundle", got)
	}
	h.wantGone(h.bundleFile(sha), "the applied sha's kept bundle")
}

// A kept bundle that no longer hashes to its sha is not used: it is fetched again.
func TestAKeptBundleIsVerifiedAgain(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	sha := h.release("v2", nil)
	h.sim.Fail(simFail("/v1/monky/data/", 503, "", ""))
	h.wantExit(h.tick(), 75)
	before := h.sim.Counts(env).BundleFetches
	_, other, _ := h.sim.Release(env, "v1")
	if err := os.WriteFile(h.bundleFile(sha), other, 0o600); err != nil { // the bytes of another sha
		t.Fatal(err)
	}
	h.wantExit(h.tick(), 75)
	if got := h.sim.Counts(env).BundleFetches - before; got != 1 {
		t.Errorf("%d fetches after the kept bundle changed, want 1 (fetched again)", got)
	}
	if rec := h.record(); rec.State == "Refused" || rec.State == "Failed" {
		t.Errorf("state %s: a changed kept bundle is fetched again, never refused", rec.State)
	}
}

// A kept bundle whose sha is no longer desired goes at the next check-in.
func TestAKeptBundleGoesWhenNoLongerDesired(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	sha := h.release("v2", nil)
	h.sim.Fail(simFail("/v1/monky/data/", 503, "", ""))
	h.wantExit(h.tick(), 75)
	if _, err := os.Stat(h.bundleFile(sha)); err != nil {
		t.Fatalf("no kept bundle: %v", err)
	}
	h.sim.ClearFails()
	v1, _, _ := h.sim.Release(env, "v1")
	if err := h.sim.SetDesired(env, v1); err != nil {
		t.Fatal(err)
	}
	h.tick()
	h.wantGone(h.bundleFile(sha), "a kept bundle no longer desired")
}

// A release whose assets fill most of a bundle (issue 47) applies through an OpenBao outage
// from its kept archive: the agent holds its small files and streams the rest from the archive
// on disk, the release directory gets every byte, and no download is left under state_dir.
func TestALargeBundleAppliesFromItsArchive(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	assets := map[string][]byte{"assets/video.bin": bytes.Repeat([]byte("\x00\x01binary"), 20<<20/8)}
	for i := 0; i < 12; i++ {
		assets[fmt.Sprintf("assets/style-%02d.css", i)] = bytes.Repeat([]byte(fmt.Sprintf("p%d{}\n", i)), (1<<20)/6)
	}
	sha := h.release("v2", func(f map[string][]byte) { maps.Copy(f, assets) })
	h.sim.Fail(simFail("/v1/monky/data/", 503, "", ""))
	h.wantExit(h.tick(), 75)
	h.wantExit(h.tick(), 75) // read from the kept archive this time
	h.sim.ClearFails()
	h.wantConverged("OpenBao back")
	rel := filepath.Join(h.cfg.DeployDir, "releases", sha)
	for n, want := range assets {
		got, err := os.ReadFile(filepath.Join(rel, n))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s in the release: %d bytes (%v), want the bundle's %d", n, len(got), err, len(want))
		}
	}
	left, _ := os.ReadDir(filepath.Dir(h.bundleFile(sha)))
	for _, e := range left {
		t.Errorf("left under state_dir/bundles: %s", e.Name())
	}
}

// A bundles directory the agent does not trust (here a link to another directory) costs only
// the keeping: the download goes to an anonymous temporary file, the apply goes on, and nothing
// is written or removed where the link points.
func TestAnUntrustedBundlesDirCostsOnlyTheKeeping(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	elsewhere := t.TempDir()
	bundles := filepath.Dir(h.bundleFile("x"))
	if err := os.RemoveAll(bundles); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, bundles); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{".keep", "old.bundle"} { // what the cleanup of kept bundles removes
		if err := os.WriteFile(filepath.Join(elsewhere, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h.release("v2", nil)
	h.wantExit(h.tick(), 0)
	if left, _ := os.ReadDir(elsewhere); len(left) != 2 {
		t.Errorf("%d entries where the link points, want the 2 that were there: one written or removed through it", len(left))
	}
	if rec := h.record(); rec.AppliedSha == "" || rec.State == "Failed" {
		t.Errorf("state %s, applied %q: the apply did not go on", rec.State, rec.AppliedSha)
	}
}
