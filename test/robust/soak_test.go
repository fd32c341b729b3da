package robust

// The chaos soak (`make soak`): the real agent ticking against monky-sim and the recording
// docker stub, with a seeded schedule of faults — on every endpoint of tenancy and OpenBao
// through the fault proxy (5xx, 429 with Retry-After in seconds and as a date, resets, stalls
// past the call timeout, truncated bodies), compose failures, hangs and unhealthy services,
// and SIGKILL of the agent at random instants — checking the invariants after every tick:
//
//   - the lease asks tenancy received never exceed 5 in any rolling hour;
//   - `status --json` answers after every tick, and its `next` is true of the next clean tick
//     (converged stays converged, refused stays refused);
//   - every desired sha ends applied or refused, and that outcome reaches tenancy (checked at
//     each checkpoint, where the faults pause until the box is at rest: no report is lost and
//     the outbox is empty);
//   - no secret value (KV canaries, the bootstrap grant) in any output, any request the agent
//     sent, or any file outside the places a secret belongs.
//
// SOAK_TICKS (default 40, so plain `go test` runs a short one) and SOAK_SEED (default 1) set
// the length and the schedule; a failure names the seed and the tick to replay it.
// SOAK_MINUTES, when set, bounds the time: the soak ends early with a checkpoint and says how
// many ticks it ran.
// Once, half-way, both meta pages of the state file are overwritten (SOAK_CORRUPT=0 skips
// it): the next tick, never killed, must move it aside and start afresh (docs/JOURNAL.md),
// importing the releases still on disk as applied before; the next checkpoint desires one of
// them again, a rollback the fresh file must still refuse.
// Not injected: disk-full windows (they need a filesystem of their own; the state-commit
// faults of states/diskfault_test.go stand in for them).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/testkit"
)

func envInt(name string, def int64) int64 {
	if n, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil && n > 0 {
		return n
	}
	return def
}

// soakEndpoints are the paths a fault may hit, tenancy's and OpenBao's.
var soakEndpoints = []struct{ proxy, match string }{
	{"tenancy", "/v1/agent/checkin"},
	{"tenancy", "/bundle"},
	{"tenancy", "/v1/agent/lease"},
	{"tenancy", "/v1/agent/report"},
	{"bao", "/v1/auth/token/lookup-self"},
	{"bao", "/v1/auth/token/renew-self"},
	{"bao", "/login"},
	{"bao", "/v1/"}, // the KV reads (and any other OpenBao call)
}

var soakFaults = []faultKind{f503, f429Secs, f429Date, fReset, fSilent, fTruncated, fLatency}

type soakRig struct {
	*box
	proxies  map[string]*faultProxy
	mu       sync.Mutex
	requests [][]byte
}

// soakBox is a box whose tenancy and OpenBao both sit behind fault proxies (1 s call
// timeouts) and whose health wait is 2 s.
func soakBox(t *testing.T, releases int) *soakRig {
	b := startBoxWith(t, soakReleases(t, releases))
	r := &soakRig{box: b, proxies: map[string]*faultProxy{}}
	raw, err := os.ReadFile(b.Config())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct{ name, re, repl string }{
		{"tenancy", `(?m)^  base_url: "http://([^"]+)"$`, "  base_url: \"http://%s\"\n  timeout_s: 1"},
		{"bao", `(?m)^  addr: "http://([^"]+)"$`, "  addr: \"http://%s\"\n  timeout_s: 1"},
	} {
		re := regexp.MustCompile(x.re)
		m := re.FindSubmatch(raw)
		if m == nil {
			t.Fatalf("no %s address in the kit config:\n%s", x.name, raw)
		}
		p := newProxy(t, string(m[1]))
		p.seen = func(d []byte) {
			r.mu.Lock()
			r.requests = append(r.requests, d)
			r.mu.Unlock()
		}
		r.proxies[x.name] = p
		raw = re.ReplaceAll(raw, []byte(fmt.Sprintf(x.repl, p.ln.Addr().String())))
	}
	raw = append(raw, []byte("\nhealthy_timeout_s: 2\n")...)
	if err := os.WriteFile(b.Config(), raw, 0o640); err != nil {
		t.Fatal(err)
	}
	return r
}

// soakReleases writes n releases r0001… (v2 with one line of config/app.toml changed, so
// each has its own sha; the odd ones without allow_rollback) beside the secrets of the demo
// releases.
func soakReleases(t *testing.T, n int) string {
	dir := t.TempDir()
	for i := 1; i <= n; i++ {
		err := testkit.CopyTree(filepath.Join(dir, fmt.Sprintf("r%04d", i)), filepath.Join(releasesDir, "v2"), func(rel string, raw []byte) ([]byte, error) {
			if rel == filepath.Join("config", "app.toml") {
				raw = append(raw, []byte(fmt.Sprintf("# soak release %d\n", i))...)
			}
			if rel == "bundle.json" && i%2 == 1 { // odd releases refuse a rollback to them
				raw = bytes.Replace(raw, []byte(`"allow_rollback": true`), []byte(`"allow_rollback": false`), 1)
			}
			return raw, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(releasesDir, "secrets.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secrets.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// releasesOnDisk are the names of the release directories under deploy_dir/releases/.
func (b *box) releasesOnDisk() map[string]bool {
	b.T.Helper()
	entries, err := os.ReadDir(filepath.Join(b.StateDir, b.Env, "releases"))
	if err != nil {
		b.T.Fatal(err)
	}
	on := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() {
			on[e.Name()] = true
		}
	}
	return on
}

// importedHistory is what a state file started afresh remembers of the applies in history
// (docs/JOURNAL.md, "How the file is used"; docs/OPERATIONS.md, "Moving a fleet from 0.1.x"):
// the first tick imports every release still under releases/ as applied before, so a
// rollback to one stays refused; an apply whose directory keep_releases already removed is
// forgotten, and a directory never applied (staged, then failed) is no apply. It also names
// the release to desire next, to check that refusal: the oldest release applied before and
// kept on disk, other than the applied one, preferring one whose bundle forbids a rollback;
// "" when there is none.
func importedHistory(onDisk map[string]bool, history []string, applied string, shas map[string]string) ([]string, string) {
	var kept []string
	for _, sha := range history {
		if onDisk[sha] {
			kept = append(kept, sha)
		}
	}
	var names []string
	for name, sha := range shas {
		if onDisk[sha] && sha != applied && slices.Contains(kept, sha) {
			names = append(names, name)
		}
	}
	odd := func(name string) bool { n, _ := strconv.Atoi(strings.TrimPrefix(name, "r")); return n%2 == 1 }
	sort.Slice(names, func(i, j int) bool {
		if oi, oj := odd(names[i]), odd(names[j]); oi != oj {
			return oi // an odd release refuses a rollback to it
		}
		return names[i] < names[j]
	})
	if len(names) == 0 {
		return kept, ""
	}
	return kept, names[0]
}

// killedTick runs a tick of bin and SIGKILLs it after delay (no kill when delay < 0).
func (b *box) killedTick(delay time.Duration) testkit.Result {
	b.T.Helper()
	return b.RunKilled(delay, "monky-deployd", nil, "--config", b.Config(), "run", "--once")
}

// soakStats are the soak's figures.
type soakStats struct {
	ticks, clean, kills, checkpoints, applied, refused, resumes int
	faults                                                      map[string]int
	exits                                                       map[int]int
}

func TestSoak(t *testing.T) {
	testkit.Heavy(t, "make soak", "the chaos soak")
	ticks := int(envInt("SOAK_TICKS", 40))
	seed := envInt("SOAK_SEED", 1)
	corrupt, corrupted := os.Getenv("SOAK_CORRUPT") != "0", -1
	const every = 10 // ticks between checkpoints (a new desired sha follows most)
	rng := rand.New(rand.NewSource(seed))
	nrel := ticks/every + 2
	r := soakBox(t, nrel)
	b := r.box
	needles := map[string]string{"bootstrap grant": b.Grant}
	for k, v := range canaries {
		needles[k] = v
	}
	shas := b.ReleaseShas()
	st := soakStats{faults: map[string]int{}, exits: map[int]int{}}
	var asks []time.Time // when each lease ask reached tenancy (as seen after the tick)
	lastAsks := 0
	var violations []string
	violate := func(tick int, format string, args ...any) {
		v := fmt.Sprintf("seed %d tick %d: %s", seed, tick, fmt.Sprintf(format, args...))
		violations = append(violations, v)
		t.Logf("VIOLATION %s", v) // at once: a long soak shows it while it runs
	}
	desired, rel := "", ""
	prevNext, prevState, prevApplied := "", "", ""
	desire := func(name string) {
		b.Desire(name)
		desired, rel = shas[name], name
		prevNext = "" // a new desired sha: the last `next` no longer holds
	}
	next := 1
	desire(fmt.Sprintf("r%04d", next))
	// history: the applies in order; a sha applied before is refused as a rollback when it
	// comes back later (unless its bundle allows it)
	var history []string
	appliedNow := ""
	// revisit: a release applied before the corruption whose directory the fresh state file
	// imported, desired at the next checkpoint
	revisit := ""

	afterTick := func(i int, res testkit.Result) {
		st.exits[res.Code]++
		for _, o := range []string{res.Stdout, res.Stderr} {
			for _, h := range scan(fmt.Sprintf("tick %d output", i), []byte(o), needles) {
				violate(i, "secret %s (%s) in the agent's output", h.secret, h.form)
			}
		}
		c := b.Counts()
		now := time.Now()
		for ; lastAsks < c.LeaseAsks; lastAsks++ {
			asks = append(asks, now)
		}
		n := 0
		for _, at := range asks {
			if now.Sub(at) < time.Hour {
				n++
			}
		}
		if n > 5 {
			violate(i, "%d lease asks within the last hour; the budget is 5", n)
		}
	}
	status := func(i int) statusDoc {
		sr := b.agent(nil, "status", "--json")
		var d statusDoc
		switch {
		case (sr.Code != 0 && sr.Code != 1) || json.Unmarshal([]byte(sr.Stdout), &d) != nil:
			violate(i, "status --json: exit %d: %s", sr.Code, sr.Stderr)
		case sr.Code == 1 && d.State != "Refused" && d.State != "Blocked" && d.State != "Failed":
			// exit 1 means the box needs a person (docs/OPERATIONS.md, "Exit codes")
			violate(i, "status --json: exit 1 with the box %s", d.State)
		case d.Next == "":
			violate(i, "status --json says nothing about next")
		}
		return d
	}
	// checkpoint: faults off; plain ticks until the box is at rest on the desired sha, with its
	// outcome reported and the outbox empty
	checkpoint := func(i int) {
		st.checkpoints++
		for _, p := range r.proxies {
			p.set("", "")
		}
		for _, k := range []string{"pull-error", "up-error", "up-sleep", "unhealthy"} {
			b.DockerKnob(k, "")
		}
		var d statusDoc
		for try := 0; try < 8; try++ {
			res := b.tick()
			st.ticks++
			afterTick(i, res)
			d = status(i)
			if d.State == "Failed" || d.State == "Blocked" {
				b.agent(nil, "resume")
				st.resumes++
				continue
			}
			if d.Outbox == 0 && (d.State == "Reported" && d.AppliedSha == desired || d.State == "Refused") && res.Code == 0 {
				break
			}
		}
		want := "applied"
		if d.State == "Refused" {
			want = "failed" // a refusal reaches tenancy as a failed report naming its code
		}
		var num int
		_, _ = fmt.Sscanf(rel, "r%d", &num)
		// the agent remembers its newest 100 applies (store.AppliedHistory): a rollback to an
		// older one is not known as one
		recent := false
		for k := max(0, len(history)-100); k < len(history); k++ {
			recent = recent || history[k] == desired
		}
		rollback := recent && desired != appliedNow && num%2 == 1
		switch {
		case d.State == "Reported" && d.AppliedSha == desired && !rollback:
			st.applied++
		case d.State == "Refused" && rollback:
			st.refused++
		default:
			violate(i, "checkpoint: desired %s (%.12s) not settled: state %s applied %.12s outbox %d next %q", rel, desired, d.State, d.AppliedSha, d.Outbox, d.Next)
			return
		}
		if d.Outbox != 0 {
			violate(i, "checkpoint: %d report(s) still in the outbox", d.Outbox)
		}
		found := false
		for _, rep := range b.Reports() {
			found = found || rep.Sha == desired && rep.Result == want
		}
		if !found {
			violate(i, "checkpoint: no %s report for %s (%.12s) reached tenancy", want, rel, desired)
		}
		if d.State == "Reported" {
			if appliedNow != desired {
				history = append(history, desired)
			}
			appliedNow = desired
		}
	}

	start := time.Now()
	budget := time.Duration(envInt("SOAK_MINUTES", 0)) * time.Minute
	planned := ticks
	for i := 1; i <= ticks; i++ {
		if i%1000 == 0 {
			t.Logf("soak: tick %d of %d, %s, %d kills, %d checkpoints, %d lease asks, %d violations so far",
				i, planned, time.Since(start).Round(time.Second), st.kills, st.checkpoints, lastAsks, len(violations))
		}
		if budget > 0 && time.Since(start) > budget && i%every == 1 {
			t.Logf("soak: SOAK_MINUTES=%d reached after %d of %d ticks: ending with a checkpoint", budget/time.Minute, i-1, planned)
			ticks = i - 1
			break
		}
		if i%every == 0 {
			checkpoint(i)
			// the next desired sha: mostly a new release; now and then one applied before
			// (refused as a rollback), or the same one again
			switch x := rng.Intn(10); {
			case revisit != "":
				desire(revisit)
				revisit = ""
			case x < 8 && next < nrel:
				next++
				desire(fmt.Sprintf("r%04d", next))
			case x < 9 && next > 1:
				desire(fmt.Sprintf("r%04d", 1+rng.Intn(next-1)))
			}
			continue
		}
		if corrupt && i == ticks/2+1 {
			// the state file corrupted once: both meta pages overwritten
			db := filepath.Join(b.StateDir, "state.db")
			if f, err := os.OpenFile(db, os.O_WRONLY, 0); err == nil {
				_, _ = f.WriteAt(bytes.Repeat([]byte{0xA5}, 2*os.Getpagesize()), 0)
				f.Close()
				st.faults["state.db corrupted"]++
				corrupted = i
				history, revisit = importedHistory(b.releasesOnDisk(), history, appliedNow, shas)
			}
		}
		// this tick's faults
		fault := ""
		if rng.Intn(100) < 40 {
			ep := soakEndpoints[rng.Intn(len(soakEndpoints))]
			f := soakFaults[rng.Intn(len(soakFaults))]
			r.proxies[ep.proxy].set(ep.match, f)
			fault = string(f) + " on " + ep.match
			st.faults[string(f)]++
		}
		compose, knob := "", "" // the docker stub's knob file set for this tick, and its content
		switch x := rng.Intn(100); {
		case x < 3:
			compose, knob = "pull-error", "Error response from daemon: injected pull failure\n"
		case x < 6:
			compose, knob = "up-error", "Error response from daemon: injected up failure\n"
		case x < 7:
			compose, knob = "up-sleep", "3\n"
		case x < 9:
			compose, knob = "unhealthy", "web\n"
		}
		if compose != "" {
			b.DockerKnob(compose, knob)
			st.faults["compose "+compose]++
		}
		kill := time.Duration(-1)
		if rng.Intn(100) < 12 {
			kill = time.Duration(rng.Intn(250)) * time.Millisecond
			st.faults["SIGKILL sent"]++
		}
		if corrupted == i {
			kill = -1
		}
		clean := fault == "" && compose == "" && kill < 0 && corrupted != i
		res := b.killedTick(kill)
		st.ticks++
		if res.Sig == syscall.SIGKILL {
			st.kills++
		}
		for _, p := range r.proxies {
			p.set("", "")
		}
		if compose != "" {
			b.DockerKnob(compose, "")
		}
		afterTick(i, res)
		if corrupted == i {
			aside, _ := filepath.Glob(filepath.Join(b.StateDir, "state.db.corrupt-*"))
			if res.Sig != 0 || len(aside) == 0 {
				violate(i, "the tick after the state file was corrupted: exit %d signal %v, moved aside: %v", res.Code, res.Sig, aside)
			}
		}
		d := status(i)
		if clean {
			st.clean++
			// `next` said what this tick would do
			switch {
			case prevNext == "converged" && prevApplied == desired && (d.State != "Reported" || d.AppliedSha != prevApplied || res.Code != 0):
				violate(i, "next said %q; the clean tick after it: exit %d, state %s, applied %.12s", prevNext, res.Code, d.State, d.AppliedSha)
			case strings.HasPrefix(prevNext, "refused: ") && strings.Contains(prevNext, "waiting for a new desired sha") && d.State != "Refused":
				violate(i, "next said %q; the clean tick after it left the box %s", prevNext, d.State)
			}
		}
		prevNext, prevState, prevApplied = d.Next, d.State, d.AppliedSha
		_ = prevState
	}
	checkpoint(ticks)

	// every request the agent sent, and every file outside the places a secret belongs
	r.mu.Lock()
	for i, req := range r.requests {
		for _, h := range scan(fmt.Sprintf("request #%d", i), req, needles) {
			if h.secret == "bootstrap grant" && bytes.Contains(req, []byte("/login")) {
				continue // the bootstrap login sends the grant to OpenBao: that is its job
			}
			violations = append(violations, fmt.Sprintf("seed %d: secret %s (%s) in a request the agent sent: %.80q", seed, h.secret, h.form, req))
		}
	}
	nreq := len(r.requests)
	r.mu.Unlock()
	_ = filepath.WalkDir(b.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(b.Dir, p)
		if secretHome(rel) {
			return nil
		}
		raw, _ := os.ReadFile(p)
		if filepath.Base(rel) == filepath.Base(b.DockerLog) {
			raw = withoutModels(raw)
		}
		for _, h := range scan(rel, raw, needles) {
			violations = append(violations, fmt.Sprintf("seed %d: secret %s (%s) in %s", seed, h.secret, h.form, rel))
		}
		return nil
	})
	var kinds []string
	for k, n := range st.faults {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	t.Logf("soak: seed %d, %d ticks (%d clean), %d kills, %d checkpoints (%d applied, %d refused as rollbacks, %d resumes), %d lease asks, %d requests scanned, exits %v",
		seed, st.ticks, st.clean, st.kills, st.checkpoints, st.applied, st.refused, st.resumes, lastAsks, nreq, st.exits)
	t.Logf("soak faults: %s", strings.Join(kinds, ", "))
	t.Logf("soak: %d violations", len(violations))
	for i, v := range violations {
		if i == 20 {
			t.Errorf("… and %d more", len(violations)-20)
			break
		}
		t.Error(v)
	}
}
