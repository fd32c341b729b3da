package robust

// The crash matrix: for every named failpoint, a tick dies there by SIGKILL, plain ticks run
// until converged, and the box must look exactly as after an uncrashed run. Then double
// faults: a second kill during the recovery tick, at a later point.
//
// CI runs every point once per scenario and a sample of double faults; `make crash`
// (MONKY_CRASH_FULL=1) runs every point in both scenarios and every ordered pair.

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/store"
)

// applyPoints are the points of an apply tick, in the order a tick passes them.
var applyPoints = []string{
	"before:CheckedIn", "after:CheckedIn",
	"before:BundleVerified", "after:BundleVerified",
	"file:tmp-synced:lease.grant", "file:grant-written",
	"before:Leased", "after:Leased",
	"file:tmp-synced:bao.token", "file:token-written", "file:grant-removed",
	"before:LoggedIn", "after:LoggedIn",
	"file:docker-config-tmp-synced", "file:docker-config-written",
	"file:stage-written", "file:release-renamed", "file:releases-synced",
	"file:model-written", "file:tmp-linked:current", "file:current-swapped",
	"before:Staged", "after:Staged",
	"before:Pulled", "after:Pulled",
	"before:Up", "after:Up",
	"before:Healthy", "after:Healthy",
	"before:Reported", "after:Reported",
}

// leasePoints are passed only when the apply leases and logs in: on a fresh box (the
// bootstrap token is never reused for an apply). An upgrade reuses the lease-derived token.
var leasePoints = map[string]bool{
	"file:tmp-synced:lease.grant": true, "file:grant-written": true, "before:Leased": true, "after:Leased": true,
	"file:tmp-synced:bao.token": true, "file:token-written": true, "file:grant-removed": true,
}

// bootstrapPoints come first on a fresh box: the bootstrap login.
var bootstrapPoints = []string{"file:tmp-synced:bao.token", "file:bootstrap-token-written", "file:bootstrap-grant-consumed"}

// recoveryOnlyPoints are reached only while a recovery tick replaces a release an earlier
// tick renamed into place: they are exercised as second faults.
var recoveryOnlyPoints = []string{"file:release-trashed", "file:release-refreshed", "file:tmp-recovered:bao.token", "file:tmp-recovered:lease.grant"}

// revertPoints are passed only when a failed apply brings back the release last healthy
// (v3 consents and its canary exits): the revert's two transitions. A recovery tick resumed in
// Reverting swaps `current` back first, so revertRecoveryPoints are its second faults.
var (
	revertPoints         = []string{"before:Reverting", "after:Reverting", "before:Failed", "after:Failed"}
	revertRecoveryPoints = []string{"file:tmp-linked:current", "file:current-swapped"}
)

// scenario is what the crashed tick does: "first" applies v1 on a fresh box (bootstrap
// login included), "upgrade" applies v2 over an applied v1, "revert" applies v3 over an applied
// v1: it fails and v1 is brought back. second are the points a recovery tick alone passes.
type scenario struct {
	name   string
	points []string
	second []string
}

// wantExit is how every tick of scenario sc ends once it is not killed: a revert parks the
// failed sha (exit 1) while v1 serves.
func wantExit(sc string) int {
	if sc == "revert" {
		return 1
	}
	return 0
}

// reference is the uncrashed run of a scenario: what every crashed run must converge to.
type reference struct {
	state, next, applied string
	env                  map[string][]byte            // release name → its rendered .env
	files                map[string]map[string][]byte // release name → path → bytes, as the uncrashed run wrote it
	models               map[string][]byte            // release name → its resolved model, the box's deploy dir as <deploy>
	shas                 map[string]string
	leases, logins       int // asked during the apply (the bootstrap login not counted)
}

var fullMatrix = os.Getenv("MONKY_CRASH_FULL") != ""

// onlyPoints, when MONKY_CRASH_POINTS (a comma list) is set, keeps the part of the matrix that
// kills at one of them: its single faults and every double or triple fault that names one.
var onlyPoints = func() map[string]bool {
	v := os.Getenv("MONKY_CRASH_POINTS")
	if v == "" {
		return nil
	}
	m := map[string]bool{}
	for _, p := range strings.Split(v, ",") {
		m[strings.TrimSpace(p)] = true
	}
	return m
}()

// kept says whether a run killing at points is in the part of the matrix asked for.
func kept(points []string) bool {
	if onlyPoints == nil {
		return true
	}
	for _, p := range points {
		if onlyPoints[p] {
			return true
		}
	}
	return false
}

// prepare brings a fresh box to the start of the scenario's crashed tick and returns the
// counts before it.
func prepare(t testing.TB, sc string) (*box, testkit.SimCounts) {
	b := startBox(t)
	if sc == "upgrade" || sc == "revert" {
		b.Desire("v1")
		if r := b.tick(); r.Code != 0 {
			t.Fatalf("setup tick: exit %d: %s", r.Code, r.Stderr)
		}
		if sc == "revert" {
			b.DockerKnob("exited", "canary 3\n")
			b.Desire("v3")
		} else {
			b.Desire("v2")
		}
	} else {
		b.Desire("v1")
	}
	return b, b.Counts()
}

// target is the release that runs once the scenario's apply is done.
func target(sc string) string {
	if sc == "upgrade" {
		return "v2"
	}
	return "v1"
}

func runReference(t *testing.T, sc string) reference {
	b, before := prepare(t, sc)
	if r := b.tick(); r.Code != wantExit(sc) {
		t.Fatalf("reference %s: exit %d: %s", sc, r.Code, r.Stderr)
	}
	st := b.status()
	after := b.Counts()
	ref := reference{state: st.State, next: st.Next, applied: st.AppliedSha, env: map[string][]byte{}, files: map[string]map[string][]byte{},
		models: map[string][]byte{}, shas: b.ReleaseShas(),
		leases: after.Leases - before.Leases, logins: after.Logins - before.Logins}
	if sc == "first" {
		ref.logins-- // the bootstrap login
	}
	for name, sha := range ref.shas {
		dir := filepath.Join(b.deployDir(), "releases", sha)
		if raw, err := os.ReadFile(filepath.Join(dir, ".env")); err == nil {
			ref.env[name] = raw
		}
		fm := map[string][]byte{}
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				fm[rel], _ = os.ReadFile(p)
			}
			return nil
		})
		if len(fm) > 0 {
			ref.files[name] = fm
		}
		if m, err := b.model(sha); err == nil {
			ref.models[name] = m
		}
	}
	if ref.applied != ref.shas[target(sc)] || ref.env[target(sc)] == nil || ref.models[target(sc)] == nil {
		t.Fatalf("reference %s: applied %q, want %s's sha %q; .env %q; a resolved model: %t", sc, ref.applied, target(sc), ref.shas[target(sc)], ref.env[target(sc)], ref.models[target(sc)] != nil)
	}
	return ref
}

func (b *box) deployDir() string { return filepath.Join(b.StateDir, envID) }

// model reads the resolved model of release sha, the box's deploy dir written <deploy> (it is
// the one path in it that differs from box to box).
func (b *box) model(sha string) ([]byte, error) {
	raw, err := os.ReadFile(filepath.Join(b.deployDir(), "resolved", sha+".yaml"))
	if err != nil {
		return nil, err
	}
	return bytes.ReplaceAll(raw, []byte(b.deployDir()), []byte("<deploy>")), nil
}

// matrixStats are the figures the matrix reports.
type matrixStats struct {
	points           map[string]bool
	runs             int
	kills            int
	notReached       int
	violations       []string
	bootstrapReplays int
	leaseReplays     int
	triples          int
	tripleKills      int
}

// crashSeed is the triple-fault sample's seed (MONKY_CRASH_SEED, default 1).
func crashSeed() int64 {
	if n, err := strconv.ParseInt(os.Getenv("MONKY_CRASH_SEED"), 10, 64); err == nil {
		return n
	}
	return 1
}

// tripleCount is how many triple faults run: 240 in the full matrix, 8 in the sample
// (MONKY_CRASH_TRIPLES overrides).
func tripleCount() int {
	if n, err := strconv.Atoi(os.Getenv("MONKY_CRASH_TRIPLES")); err == nil && n >= 0 {
		return n
	}
	if fullMatrix {
		return 240
	}
	return 8
}

// sampleTriples draws n sequences of three kill points: the first from the scenario's points,
// the next two from any point a recovery tick may pass (earlier ones included: a recovery tick
// starts again from its check-in).
func sampleTriples(sc scenario, n int, seed int64) [][]string {
	rng := rand.New(rand.NewSource(seed))
	any := append(append([]string{}, sc.points...), sc.second...)
	out := make([][]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, []string{sc.points[rng.Intn(len(sc.points))], any[rng.Intn(len(any))], any[rng.Intn(len(any))]})
	}
	return out
}

// merge adds o's figures to s.
func (s *matrixStats) merge(o *matrixStats) {
	for p := range o.points {
		s.points[p] = true
	}
	s.runs += o.runs
	s.kills += o.kills
	s.notReached += o.notReached
	s.violations = append(s.violations, o.violations...)
	s.bootstrapReplays += o.bootstrapReplays
	s.leaseReplays += o.leaseReplays
	s.triples += o.triples
	s.tripleKills += o.tripleKills
}

// runner runs crash runs as parallel subtests of one group (each run is its own box: its own
// simulator, state and deploy dirs) and gathers their figures.
type runner struct {
	t     *testing.T
	mu    sync.Mutex
	stats *matrixStats
	n     int
}

func newRunner(t *testing.T) *runner {
	return &runner{t: t, stats: &matrixStats{points: map[string]bool{}}}
}

// group runs body, whose runs execute in parallel, and returns when all have ended.
func (r *runner) group(name string, body func()) {
	parent := r.t
	parent.Run(name, func(t *testing.T) {
		r.t = t
		body()
	})
	r.t = parent
}

func (r *runner) run(sc string, ref reference, points []string, mustReach bool) {
	r.n++
	if !kept(points) {
		return
	}
	r.t.Run(fmt.Sprintf("%04d", r.n), func(t *testing.T) {
		t.Parallel()
		local := &matrixStats{points: map[string]bool{}}
		if len(points) == 3 {
			local.triples++
		}
		crashRun(t, local, sc, ref, points, mustReach)
		r.mu.Lock()
		r.stats.merge(local)
		r.mu.Unlock()
	})
}

func (s *matrixStats) violate(run, format string, args ...any) {
	v := run + ": " + fmt.Sprintf(format, args...)
	s.violations = append(s.violations, v)
}

func TestCrashMatrix(t *testing.T) {
	testkit.Heavy(t, "make crash", "a sample of the matrix; make crash runs every point and pair")
	var upgrade []string
	for _, p := range applyPoints {
		if !leasePoints[p] {
			upgrade = append(upgrade, p)
		}
	}
	first := append(append([]string{}, bootstrapPoints...), applyPoints...)
	if !fullMatrix {
		// CI: on a fresh box only the points an upgrade cannot reach
		first = append([]string{}, bootstrapPoints...)
		for _, p := range applyPoints {
			if leasePoints[p] {
				first = append(first, p)
			}
		}
	}
	scenarios := []scenario{
		{"upgrade", upgrade, recoveryOnlyPoints},
		{"first", first, recoveryOnlyPoints},
		{"revert", revertPoints, revertRecoveryPoints},
	}
	r := newRunner(t)
	for _, sc := range scenarios {
		ref := runReference(t, sc.name)
		r.group(sc.name, func() {
			for _, p := range sc.points {
				r.run(sc.name, ref, []string{p}, true)
			}
			// double faults: a second kill in the recovery tick, at a later point
			var pairs [][2]string
			for i, p := range sc.points {
				for _, q := range sc.second {
					pairs = append(pairs, [2]string{p, q})
				}
				for _, q := range sc.points[i+1:] {
					pairs = append(pairs, [2]string{p, q})
				}
			}
			if !fullMatrix {
				pairs = samplePairs(pairs, 6)
			}
			for _, pq := range pairs {
				r.run(sc.name, ref, pq[:], false)
			}
			// triple faults: three kills in a row at points drawn with a fixed seed
			for _, seq := range sampleTriples(sc, tripleCount()/len(scenarios), crashSeed()+int64(len(sc.name))) {
				r.run(sc.name, ref, seq, false)
			}
		})
	}
	stats := r.stats
	names := make([]string, 0, len(stats.points))
	for p := range stats.points {
		names = append(names, p)
	}
	sort.Strings(names)
	t.Logf("crash matrix: %d points covered, %d runs, %d kills, %d second points not reached, %d replayed bootstrap logins, %d replayed leases, %d violations",
		len(stats.points), stats.runs, stats.kills, stats.notReached, stats.bootstrapReplays, stats.leaseReplays, len(stats.violations))
	t.Logf("crash matrix: %d triple faults (seed %d), %d kills in them", stats.triples, crashSeed(), stats.tripleKills)
	t.Logf("points: %s", strings.Join(names, " "))
	for p := range onlyPoints {
		if !stats.points[p] {
			t.Errorf("MONKY_CRASH_POINTS names %s, which no run killed at", p)
		}
	}
	if !stats.points["file:release-trashed"] && onlyPoints == nil {
		t.Error("the release replacement (file:release-trashed) was never exercised")
	}
	for _, v := range stats.violations {
		t.Error(v)
	}
}

// samplePairs keeps n pairs spread evenly over the list, always including the release
// replacement (a kill after the rename, then one while the old directory is trashed).
func samplePairs(all [][2]string, n int) [][2]string {
	var out [][2]string
	for _, pq := range all {
		if pq[0] == "file:release-renamed" && pq[1] == "file:release-trashed" {
			out = append(out, pq)
		}
	}
	if len(all) <= n {
		return all
	}
	step := float64(len(all)) / float64(n)
	for i := 0; i < n; i++ {
		out = append(out, all[int(float64(i)*step)])
	}
	return out
}

// crashRun kills ticks at points (one per tick, in order), checks the box right after the
// kill, then runs plain ticks until converged and checks the end state against ref.
// mustReach: every point must kill (a single-fault run); else a later point the recovery
// tick never passes counts as not reached.
func crashRun(t *testing.T, stats *matrixStats, sc string, ref reference, points []string, mustReach bool) {
	run := sc + " " + strings.Join(points, " → ")
	b, before := prepare(t, sc)
	defer b.Stop()
	stats.runs++
	for i, p := range points {
		r := b.tick("MONKY_DEPLOYD_FAILPOINT=" + p)
		if r.Sig != syscall.SIGKILL {
			if mustReach || i == 0 {
				stats.violate(run, "tick at %s: exit %d, signal %v; want death by SIGKILL; stderr:\n%s", p, r.Code, r.Sig, r.Stderr)
				return
			}
			stats.notReached++
			if r.Code != wantExit(sc) {
				stats.violate(run, "recovery tick (second point %s not reached): exit %d: %s", p, r.Code, r.Stderr)
			}
			break
		}
		stats.kills++
		if len(points) == 3 {
			stats.tripleKills++
		}
		stats.points[p] = true
		for _, v := range checkRelease(b, ref, sc) {
			stats.violate(run, "after the kill at %s: %s", p, v)
		}
	}
	converged := false
	var st statusDoc // as the last recovery tick left the box
	for i := 0; i < 5 && !converged; i++ {
		r := b.tick()
		if r.Code != wantExit(sc) {
			stats.violate(run, "recovery tick %d: exit %d: %s", i+1, r.Code, r.Stderr)
		}
		st = b.status()
		converged = st.State == ref.state && st.Next == ref.next && st.AppliedSha == ref.applied
	}
	if !converged {
		stats.violate(run, "not converged after 5 ticks: state %q next %q applied %.12s; want %q %q %.12s", st.State, st.Next, st.AppliedSha, ref.state, ref.next, ref.applied)
	}
	if st.Outbox != 0 {
		stats.violate(run, "outbox holds %d unacknowledged report(s)", st.Outbox)
	}
	for _, v := range checkEnd(b, ref, sc, before, stats) {
		stats.violate(run, "%s", v)
	}
}

// checkRelease: `current` (when present) points at a complete release whose .env is 0600 and
// wholly one release's rendered .env.
func checkRelease(b *box, ref reference, sc string) []string {
	var bad []string
	cur := filepath.Join(b.deployDir(), "current")
	target, err := os.Readlink(cur)
	if err != nil {
		if sc == "first" && os.IsNotExist(err) {
			return nil // nothing applied yet
		}
		return []string{"current: " + err.Error()}
	}
	sha := filepath.Base(target)
	name := ""
	for n, s := range ref.shas {
		if s == sha {
			name = n
		}
	}
	if name == "" {
		return []string{"current → " + target + ": no release of that sha"}
	}
	if ref.files[name] == nil {
		return []string{"current → " + name + ", a release the uncrashed run never wrote"}
	}
	for rel, want := range ref.files[name] {
		if rel == ".env" {
			continue // wholly old or new: below
		}
		got, err := os.ReadFile(filepath.Join(cur, rel))
		if err != nil || !bytes.Equal(got, want) {
			bad = append(bad, fmt.Sprintf("current (%s): %s missing or different", name, rel))
		}
	}
	env := filepath.Join(cur, ".env")
	fi, err := os.Stat(env)
	if err != nil {
		return append(bad, "current/.env: "+err.Error())
	}
	if fi.Mode().Perm() != 0o600 {
		bad = append(bad, fmt.Sprintf("current/.env mode %o, want 600", fi.Mode().Perm()))
	}
	raw, _ := os.ReadFile(env)
	whole := false
	for _, e := range ref.env {
		whole = whole || bytes.Equal(raw, e)
	}
	if !whole {
		bad = append(bad, fmt.Sprintf("current/.env (%d bytes) is neither release's rendered .env", len(raw)))
	}
	// compose runs the resolved model of the release `current` points at: it was written,
	// whole and 0600, before `current` was swapped to it
	mp := filepath.Join(b.deployDir(), "resolved", sha+".yaml")
	if fi, err := os.Stat(mp); err != nil {
		bad = append(bad, fmt.Sprintf("current → %s, whose resolved model is missing: %v", name, err))
	} else if fi.Mode().Perm() != 0o600 {
		bad = append(bad, fmt.Sprintf("resolved model of %s: mode %o, want 600", name, fi.Mode().Perm()))
	} else if m, _ := b.model(sha); !bytes.Equal(m, ref.models[name]) {
		bad = append(bad, fmt.Sprintf("resolved model of %s (%d bytes) is not the one the uncrashed run wrote", name, len(m)))
	}
	return bad
}

func checkEnd(b *box, ref reference, sc string, before testkit.SimCounts, stats *matrixStats) []string {
	bad := checkRelease(b, ref, sc)
	cur, _ := os.Readlink(filepath.Join(b.deployDir(), "current"))
	if filepath.Base(cur) != ref.applied {
		bad = append(bad, "current → "+cur+", want the applied release")
	} else if raw, _ := os.ReadFile(filepath.Join(b.deployDir(), "current", ".env")); !bytes.Equal(raw, ref.env[target(sc)]) {
		bad = append(bad, "current/.env is not the applied release's")
	}
	db, err := store.OpenBolt(filepath.Join(b.StateDir, "state.db"), store.BoltOptions{ReadOnly: true})
	if err != nil {
		bad = append(bad, "state.db: "+err.Error())
	} else if err := db.Check(); err != nil {
		bad = append(bad, "bbolt check: "+err.Error())
	}
	if aside, _ := filepath.Glob(filepath.Join(b.StateDir, "state.db.corrupt-*")); len(aside) > 0 {
		bad = append(bad, fmt.Sprintf("state.db was moved aside as corrupt: %v", aside))
	}
	// exactly the uncrashed run's leases and logins: no kill may cost a second of either
	// (docs/RELIABILITY.md, "Crash matrix"), the bootstrap login included
	after := b.Counts()
	leases, logins := after.Leases-before.Leases, after.Logins-before.Logins
	if sc == "first" {
		if logins > ref.logins+1 {
			stats.bootstrapReplays++ // counted here; a violation all the same
		}
		logins-- // the bootstrap login
	}
	if leases > ref.leases {
		stats.leaseReplays++
	}
	if leases != ref.leases || logins != ref.logins {
		bad = append(bad, fmt.Sprintf("leases %d, logins %d for one apply; the uncrashed run: %d, %d", leases, logins, ref.leases, ref.logins))
	}
	if g, err := os.ReadFile(filepath.Join(b.Kit, "bootstrap.jwt")); err == nil && len(bytes.TrimSpace(g)) > 0 {
		bad = append(bad, "the bootstrap grant was used but not consumed")
	}
	// exactly one acknowledged outcome for the apply: reports of the applied sha may repeat
	// (a kill between tenancy's acknowledgement and the commit of Reported resends the queued
	// report), but they all say `applied`.
	outcomes := map[string]int{}
	reports := b.Reports()
	for _, r := range reports {
		if r.Sha == ref.applied {
			outcomes[r.Result]++
		}
	}
	if len(outcomes) != 1 || outcomes["applied"] == 0 {
		bad = append(bad, fmt.Sprintf("reports for the applied sha: %v; want only `applied`", outcomes))
	}
	if sc == "revert" {
		// the failed sha: failed, and every report of it says what was brought back (a kill
		// before the revert's end never sent one without reverted_to)
		n := 0
		for _, r := range reports {
			if r.Sha != ref.shas["v3"] {
				continue
			}
			n++
			if r.Result != "failed" || r.RevertedTo != ref.applied {
				bad = append(bad, fmt.Sprintf("a report for v3: %s reverted_to %.12s (%s); want failed reverted_to v1", r.Result, r.RevertedTo, r.Detail))
			}
		}
		if n == 0 {
			bad = append(bad, "tenancy holds no report of the failed v3")
		}
	}
	if left := leftovers(b); len(left) > 0 {
		bad = append(bad, fmt.Sprintf("temp files left: %v", left))
	}
	if _, err := os.Stat(filepath.Join(b.StateDir, "lease.grant")); err == nil {
		bad = append(bad, "a leased grant is still kept after the apply")
	}
	return bad
}

// leftovers lists temp names anywhere under the box's state and kit dirs.
func leftovers(b *box) []string {
	var out []string
	for _, root := range []string{b.StateDir, b.Kit} {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			n := d.Name()
			if strings.Contains(n, ".tmp-") || strings.HasPrefix(n, ".staging-") || strings.HasPrefix(n, ".trash-") ||
				strings.HasPrefix(n, ".config.json.") || strings.HasSuffix(n, ".compact") {
				rel, _ := filepath.Rel(b.Dir, p)
				out = append(out, rel)
			}
			return nil
		})
	}
	sort.Strings(out)
	return out
}
