package states_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/effects/files/filestest"
	"github.com/tikali/monky-deployd/internal/testkit"
)

// Power loss, not just a kill: the agent's file writes go through filestest.CrashFS, which keeps
// only what was fsynced (file content after an fsync of the file, a directory entry after an
// fsync of its directory). An apply tick is cut at its k-th file operation, for every k, and
// once more after it completes; the tree under state_dir falls back to its durable state and
// plain ticks run until converged.

const registryManifest = `{"entries": [
  {"var": "GEMINI_API_KEY", "path": "monky/data/env-qa-02/see/gemini", "key": "value", "version": 1},
  {"var": "DB_PASSWORD", "path": "monky/data/env-qa-02/see/db", "key": "password"},
  {"use": "registry-auth", "path": "monky/data/env-qa-02/see/registry", "version": 1}
]}`

// plScenario is one power-loss scenario: prepare brings a box to just before the apply
// tick under test and returns the sha that tick must apply (and the sha applied before, if
// any).
type plScenario struct {
	name    string
	prepare func(h *harness) (want, old string)
}

var plScenarios = []plScenario{
	{"first", func(h *harness) (string, string) {
		return h.release("v1", withRegistry), ""
	}},
	{"upgrade", func(h *harness) (string, string) {
		old := h.release("v1", withRegistry)
		h.wantExit(h.tick(), 0)
		return h.release("v2", withRegistry), old
	}},
}

func withRegistry(f map[string][]byte) { f["secrets.manifest.json"] = []byte(registryManifest) }

func newPLHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.sim.PutSecret(env, "registry", map[string]string{"value": `{"registry": "harbor.example", "username": "robot", "password": "canary-reg-pw-Pl4"}`})
	return h
}

// plBox is a box under a CrashFS.
type plBox struct {
	h   *harness
	cfs *filestest.CrashFS
}

func newPLBox(t *testing.T, sc plScenario) (*plBox, string, string) {
	h := newPLHarness(t)
	want, old := sc.prepare(h)
	cfs, err := filestest.NewCrashFS(h.cfg.StateDir, func(rel string) bool {
		return rel == "state.db" || strings.HasPrefix(rel, "state.db.") || rel == "lock"
	})
	if err != nil {
		t.Fatal(err)
	}
	return &plBox{h: h, cfs: cfs}, want, old
}

// tick runs one tick on the CrashFS; crashed is true when the power went at the crash point.
func (b *plBox) tick() (exit int, crashed bool) {
	defer func() {
		if r := recover(); r != nil {
			if err, ok := r.(error); !ok || !errors.Is(err, filestest.ErrCrashed) {
				panic(r)
			}
			crashed = true
		}
		b.h.clock.Advance(60e9)
	}()
	a := b.h.agent()
	a.FS = b.cfs
	return a.Tick(context.Background()).Exit, false
}

// reference is an uncrashed run's tree: relative path → content, for every release file,
// the docker config, and the number of modelled operations of the apply tick.
type reference struct {
	release map[string]map[string][]byte // sha → name → content
	docker  []byte
	ops     int
}

func plReference(t *testing.T, sc plScenario) reference {
	b, want, old := newPLBox(t, sc)
	b.h.wantExit(func() int { e, _ := b.tick(); return e }(), 0)
	ref := reference{release: map[string]map[string][]byte{}, ops: b.cfs.Ops()}
	for _, sha := range []string{want, old} {
		if sha == "" {
			continue
		}
		m, err := readTree(filepath.Join(b.h.cfg.DeployDir, "releases", sha))
		if err != nil {
			t.Fatal(err)
		}
		ref.release[sha] = m
	}
	var err error
	if ref.docker, err = os.ReadFile(filepath.Join(b.h.cfg.DockerConfigDir(), "config.json")); err != nil {
		t.Fatal(err)
	}
	if ref.release[want][".env"] == nil || ref.ops < 10 {
		t.Fatalf("reference run: .env %q, %d operations", ref.release[want][".env"], ref.ops)
	}
	return ref
}

func readTree(root string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(root, p)
		out[r] = b
		return nil
	})
	return out, err
}

// boxViolations checks what must hold at any moment: `current` absent (first apply only) or
// pointing at a complete release (every file byte for byte, .env 0600); the token, grant and
// docker config absent or whole. final adds: converged files, no temp files, no grant.
func boxViolations(h *harness, ref reference, want, old string, final bool) []string {
	var v []string
	deploy := h.cfg.DeployDir
	cur, err := os.Readlink(filepath.Join(deploy, "current"))
	switch {
	case err != nil && (old != "" || final):
		v = append(v, "current missing")
	case err == nil:
		sha := filepath.Base(cur)
		if cur != filepath.Join("releases", sha) || (sha != want && sha != old) || final && sha != want {
			v = append(v, "current points at "+cur)
			break
		}
		got, rerr := readTree(filepath.Join(deploy, cur))
		if rerr != nil {
			v = append(v, "current release unreadable: "+rerr.Error())
		}
		for name, data := range ref.release[sha] {
			if string(got[name]) != string(data) {
				v = append(v, fmt.Sprintf("current release %s: %s is not the rendered file (%d bytes, want %d)", sha[:7], name, len(got[name]), len(data)))
			}
		}
		if st, err := os.Stat(filepath.Join(deploy, cur, ".env")); err == nil && st.Mode().Perm() != 0o600 {
			v = append(v, fmt.Sprintf(".env mode %o", st.Mode().Perm()))
		}
	}
	for _, p := range []string{h.cfg.TokenPath(), h.cfg.GrantPath()} {
		b, err := os.ReadFile(p)
		if err != nil {
			if final && p == h.cfg.TokenPath() {
				v = append(v, "token missing")
			}
			continue
		}
		if len(b) < 2 || !strings.HasSuffix(string(b), "\n") || strings.Count(string(b), "\n") != 1 {
			v = append(v, fmt.Sprintf("%s not whole (%d bytes)", filepath.Base(p), len(b)))
		}
		if final && p == h.cfg.GrantPath() {
			v = append(v, "leased grant left on disk")
		}
	}
	dc := filepath.Join(h.cfg.DockerConfigDir(), "config.json")
	if b, err := os.ReadFile(dc); err == nil {
		if string(b) != string(ref.docker) {
			v = append(v, fmt.Sprintf("docker config not whole (%d bytes)", len(b)))
		}
	} else if final || old != "" {
		v = append(v, "docker config missing")
	}
	if final {
		for _, dir := range []string{deploy, h.cfg.StateDir, h.cfg.DockerConfigDir()} {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				n := e.Name()
				if strings.Contains(n, ".tmp-") || strings.HasPrefix(n, ".staging-") || strings.HasPrefix(n, ".trash-") || strings.HasPrefix(n, ".config.json.") {
					v = append(v, "temp file left: "+filepath.Join(filepath.Base(dir), n))
				}
			}
		}
	}
	return v
}

// plRun cuts the apply tick at operation k (k > ops: after the tick) and recovers.
func plRun(t *testing.T, sc plScenario, ref reference, k int, mutant func(b *plBox)) []string {
	b, want, old := newPLBox(t, sc)
	if mutant != nil {
		mutant(b)
	}
	var v []string
	if k <= ref.ops {
		b.cfs.CrashAt(k)
		if _, crashed := b.tick(); !crashed {
			return []string{fmt.Sprintf("operation %d of %d not reached", k, ref.ops)}
		}
	} else {
		b.tick()
	}
	if err := b.cfs.Crash(); err != nil {
		t.Fatal(err)
	}
	for _, s := range boxViolations(b.h, ref, want, old, false) {
		v = append(v, "after the power loss: "+s)
	}
	b.cfs.IgnoreDirSync, b.cfs.SkipDirSync = false, nil
	return append(v, b.recover(ref, want, old)...)
}

// recover runs plain ticks until the box has converged on want, five at most, and returns
// what does not hold then.
func (b *plBox) recover(ref reference, want, old string) []string {
	var v []string
	converged := false
	for i := 0; i < 5 && !converged; i++ {
		b.tick()
		rec := b.h.record()
		converged = rec.State == "Reported" && rec.AppliedSha == want
	}
	if !converged {
		rec := b.h.record()
		v = append(v, fmt.Sprintf("not converged after 5 ticks: state %s applied %.7s", rec.State, rec.AppliedSha))
	}
	for _, s := range boxViolations(b.h, ref, want, old, true) {
		v = append(v, "after recovery: "+s)
	}
	return v
}

// TestPowerLossMatrix cuts the power at every file operation of an apply tick and after it,
// in both scenarios: no point may leave the box unable to converge or with a torn file.
func TestPowerLossMatrix(t *testing.T) {
	testkit.Heavy(t, "make test-heavy", "every power-loss point of both scenarios")
	runs := 0
	for _, sc := range plScenarios {
		t.Run(sc.name, func(t *testing.T) {
			ref := plReference(t, sc)
			for k := 1; k <= ref.ops+1; k++ {
				runs++
				if v := plRun(t, sc, ref, k, nil); len(v) > 0 {
					t.Errorf("power lost at operation %d of %d: %s", k, ref.ops, strings.Join(v, "; "))
				}
			}
			t.Logf("%s: %d file operations, %d power losses, each recovered", sc.name, ref.ops, ref.ops+1)
		})
	}
	t.Logf("%d runs", runs)
}

// TestPowerLossMatrixCatchesAMissingDirectoryFsync is the mutant run: with every directory
// fsync ignored, or only the one that publishes releases/<sha>, the matrix must report
// violations.
func TestPowerLossMatrixCatchesAMissingDirectoryFsync(t *testing.T) {
	mutants := []struct {
		name string
		sc   plScenario
		set  func(b *plBox)
	}{
		{"every-dir-fsync", plScenarios[0], func(b *plBox) { b.cfs.IgnoreDirSync = true }},
		{"releases-fsync", plScenarios[1], func(b *plBox) {
			releases := filepath.Join(b.h.cfg.DeployDir, "releases")
			b.cfs.SkipDirSync = func(dir string) bool { return dir == releases }
		}},
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			ref := plReference(t, m.sc)
			// from the last point down; the whole sweep with MONKY_POWERLOSS_FULL=1
			full := os.Getenv("MONKY_POWERLOSS_FULL") != ""
			caught, tried := 0, 0
			var last string
			for k := ref.ops + 1; k >= 1 && (full || caught == 0); k-- {
				tried++
				if v := plRun(t, m.sc, ref, k, m.set); len(v) > 0 {
					if caught == 0 {
						last = fmt.Sprintf("operation %d: %s", k, strings.Join(v, "; "))
					}
					caught++
				}
			}
			if caught == 0 {
				t.Fatalf("mutant %s: %d power losses reported nothing", m.name, tried)
			}
			t.Logf("mutant %s (%s) caught at %d of %d points tried; latest: %s", m.name, m.sc.name, caught, tried, last)
		})
	}
}

// TestPowerLossDoubleFault cuts the power twice in a row: the apply tick at its k-th file
// operation, then the recovery tick at its j-th, each followed by the fall back to what was
// durable; plain ticks must then converge with no torn file. Pairs are drawn with a fixed
// seed (MONKY_POWERLOSS_SEED); 12 per scenario, 100 with MONKY_POWERLOSS_FULL=1.
func TestPowerLossDoubleFault(t *testing.T) {
	testkit.Heavy(t, "make crash", "power-loss double faults")
	n := 12
	if os.Getenv("MONKY_POWERLOSS_FULL") != "" {
		n = 100
	}
	seed := int64(1)
	if s, err := strconv.ParseInt(os.Getenv("MONKY_POWERLOSS_SEED"), 10, 64); err == nil {
		seed = s
	}
	rng := rand.New(rand.NewSource(seed))
	runs, second := 0, 0
	for _, sc := range plScenarios {
		t.Run(sc.name, func(t *testing.T) {
			ref := plReference(t, sc)
			for i := 0; i < n; i++ {
				k, j := 1+rng.Intn(ref.ops), 1+rng.Intn(ref.ops)
				runs++
				b, want, old := newPLBox(t, sc)
				b.cfs.CrashAt(k)
				if _, crashed := b.tick(); !crashed {
					t.Fatalf("operation %d of %d not reached", k, ref.ops)
				}
				if err := b.cfs.Crash(); err != nil {
					t.Fatal(err)
				}
				b.cfs.CrashAt(j)
				if _, crashed := b.tick(); crashed {
					second++
				}
				if err := b.cfs.Crash(); err != nil {
					t.Fatal(err)
				}
				var v []string
				for _, s := range boxViolations(b.h, ref, want, old, false) {
					v = append(v, "after the second power loss: "+s)
				}
				v = append(v, b.recover(ref, want, old)...)
				if len(v) > 0 {
					t.Errorf("power lost at operation %d, then at operation %d of the recovery tick: %s", k, j, strings.Join(v, "; "))
				}
			}
		})
	}
	t.Logf("power-loss double faults: %d runs (seed %d), %d second cuts reached", runs, seed, second)
}
