package states_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

func TestFreshBoxAppliesThenHeartbeats(t *testing.T) {
	h := newHarness(t)
	sha := h.release("v1", nil)

	h.wantExit(h.tick(), 0)

	h.wantGone(filepath.Join(h.kit, "bootstrap.jwt"), "bootstrap grant not consumed")
	if m := testkit.Mode(t, h.cfg.TokenPath()); m != 0o600 {
		t.Errorf("token mode %o", m)
	}
	rel := filepath.Join(h.cfg.DeployDir, "releases", sha)
	if m := testkit.Mode(t, rel); m != 0o700 {
		t.Errorf("release dir mode %o", m)
	}
	envFile := filepath.Join(rel, ".env")
	if m := testkit.Mode(t, envFile); m != 0o600 {
		t.Errorf(".env mode %o", m)
	}
	envText, _ := os.ReadFile(envFile)
	for _, want := range []string{"GEMINI_API_KEY=canary-gemini-v1-Qx7", "DB_PASSWORD=canary-db-pw-Kw3", `LITERAL="$${NOT_A_REF}"`, "RELEASE=v1"} {
		if !strings.Contains(string(envText), want) {
			t.Errorf(".env lacks %q:\n%s", want, envText)
		}
	}
	if target, _ := os.Readlink(filepath.Join(h.cfg.DeployDir, "current")); target != filepath.Join("releases", sha) {
		t.Errorf("current → %q", target)
	}
	c := h.sim.Counts(env)
	if c.Leases != 1 || c.Logins != 2 {
		t.Errorf("leases %d logins %d, want 1 lease and 2 logins (bootstrap + lease)", c.Leases, c.Logins)
	}
	if res, _ := h.lastReport(); res != "applied" {
		t.Errorf("report %q", res)
	}
	calls := strings.Join(h.composeCalls(), "\n")
	model := filepath.Join(h.cfg.DeployDir, "resolved", sha+".yaml")
	pinned := "compose -f " + model + " --env-file " + filepath.Join(h.cfg.DeployDir, "resolved", "empty.env") + " --project-directory " + rel + " -p monky-env-qa-02 "
	if !strings.Contains(calls, pinned+"pull") || !strings.Contains(calls, pinned+"up -d --remove-orphans") {
		t.Errorf("compose calls:\n%s", calls)
	}
	if m := testkit.Mode(t, model); m != 0o600 {
		t.Errorf("resolved model mode %o", m)
	}
	if m := testkit.Mode(t, filepath.Dir(model)); m != 0o700 {
		t.Errorf("resolved dir mode %o", m)
	}
	rec := h.record()
	if rec.State != "Reported" || rec.AppliedSha != sha || rec.Token.Source != "lease" {
		t.Errorf("record state %s applied %s token %s", rec.State, rec.AppliedSha, rec.Token.Source)
	}

	before := len(h.composeCalls())
	h.wantExit(h.tick(), 0)
	if got := len(h.composeCalls()); got != before {
		t.Errorf("heartbeat ran compose beyond ps: %v", h.composeCalls()[before:])
	}
	if c := h.sim.Counts(env); c.Leases != 1 || c.Reports != 2 {
		t.Errorf("after heartbeat: leases %d reports %d", c.Leases, c.Reports)
	}
	doc, err := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if doc.State != "Reported" || doc.Next != "converged" || doc.EnvID != env {
		t.Errorf("explain: state %q next %q env %q", doc.State, doc.Next, doc.EnvID)
	}
	last := doc.Ticks[len(doc.Ticks)-1]
	var path []string
	for _, tr := range last.Transitions {
		if tr.From != tr.To {
			path = append(path, tr.From+">"+tr.To)
		}
	}
	if got := strings.Join(path, " "); got != "Idle>CheckedIn CheckedIn>Healthy Healthy>Reported" {
		t.Errorf("heartbeat path %q", got)
	}
}

func TestHeartbeatsFoldInTheJournal(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	for i := 0; i < 50; i++ {
		h.wantExit(h.tick(), 0)
	}
	doc, err := explain.Build(h.st, explain.Options{N: 100, Now: h.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Ticks) != 2 {
		t.Fatalf("%d ticks kept, want 2 (the apply and one folded heartbeat)", len(doc.Ticks))
	}
	if doc.Ticks[1].Folded != 49 {
		t.Errorf("folded %d, want 49", doc.Ticks[1].Folded)
	}
}

func TestSecondApplyReusesTheLeaseToken(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	sha2 := h.apply("v2")
	if c := h.sim.Counts(env); c.Leases != 1 {
		t.Errorf("leases %d, want 1: the lease-derived token is reused", c.Leases)
	}
	if rec := h.record(); rec.AppliedSha != sha2 {
		t.Errorf("applied %s", rec.AppliedSha)
	}
}

func TestRateLimitedLeaseAppliesWithTheWorkingToken(t *testing.T) {
	h := newHarness(t)
	h.sim.Fail(simFail("/v1/agent/lease", 429, "LEASE_RATE_LIMITED", "600"))
	h.apply("v1")
	rec := h.record()
	if rec.Token.Source != "bootstrap" {
		t.Errorf("token source %q, want bootstrap (swap deferred)", rec.Token.Source)
	}
	if res, _ := h.lastReport(); res != "applied" {
		t.Errorf("report %q", res)
	}
	if !rec.LeaseRetryAfter.After(h.clock.Now()) {
		t.Errorf("Retry-After not recorded: %v", rec.LeaseRetryAfter)
	}
}

func TestLeaseBudgetIsNeverExceeded(t *testing.T) {
	h := newHarness(t)
	// a renew_below_s above the token ttl makes every lease-derived token unfit for reuse,
	// so every apply wants a lease
	cfgPath := filepath.Join(h.kit, "config.yaml")
	b, _ := os.ReadFile(cfgPath)
	b = []byte(strings.Replace(string(b), "bao:\n", "bao:\n  renew_below_s: 200000\n", 1))
	if err := os.WriteFile(cfgPath, b, 0o640); err != nil {
		t.Fatal(err)
	}
	h.reload()
	for i := 0; i < 7; i++ {
		h.release("r"+string(rune('a'+i)), nil)
		if code := h.tick(); code != 0 && code != 75 {
			t.Fatalf("apply %d: exit %d\n%s", i, code, h.logs.String())
		}
	}
	c := h.sim.Counts(env)
	if c.LeasesRefused != 0 {
		t.Errorf("the agent earned %d 429s it could foresee", c.LeasesRefused)
	}
	if c.LeaseAsks > 5 {
		t.Errorf("%d leases asked in one hour, budget is 5", c.LeaseAsks)
	}
	if h.clock.Now().Sub(testkit.Epoch) > time.Hour {
		t.Fatalf("the test took more than a simulated hour")
	}
}

// leasedWithKeptGrant leases for v1 and leaves the login unanswered once: the tick ends 75 in
// Leased, the grant kept 0600 for the next tick.
func leasedWithKeptGrant(t *testing.T) *harness {
	h := newHarness(t)
	h.wantExit(h.tick(), 0) // bootstrap; nothing desired yet
	h.sim.Fail(simFailTimes("/v1/auth/jwt-tenancy/login", 503, 1))
	h.release("v1", nil)
	h.wantExit(h.tick(), 75)
	if rec := h.record(); rec.State != "Leased" {
		t.Fatalf("state %s, want Leased", rec.State)
	}
	if m := testkit.Mode(t, h.cfg.GrantPath()); m != 0o600 {
		t.Errorf("kept grant mode %o", m)
	}
	return h
}

// keptGrantLogsIn runs the tick that logs in with the kept grant: one lease in all, no grant left.
func (h *harness) keptGrantLogsIn() {
	h.t.Helper()
	h.wantExit(h.tick(), 0)
	if c := h.sim.Counts(env); c.Leases != 1 {
		h.t.Errorf("leases %d, want 1: the kept grant logs in", c.Leases)
	}
	if _, err := os.Stat(h.cfg.GrantPath()); !os.IsNotExist(err) {
		h.t.Errorf("grant file left after login")
	}
}

func TestExit75AtLoginKeepsTheGrant(t *testing.T) {
	leasedWithKeptGrant(t).keptGrantLogsIn()
}

// A tick that resumes in Leased asks OpenBao whether the kept grant already logged in; when
// OpenBao does not answer, the tick ends 75 on a login-failed note that says why (a word of the
// journal's vocabulary, logged as a warning, with no second entry for the tick's end), and the
// next tick logs in with the kept grant: still one lease.
func TestExit75AtLoginLookupKeepsTheGrant(t *testing.T) {
	h := leasedWithKeptGrant(t)
	h.sim.Fail(simFailTimes("/v1/auth/token/lookup-self", 503, 1))
	h.logs.Reset()
	h.wantExit(h.tick(), 75)
	e, ok := h.entry(func(e store.Entry) bool { return strings.Contains(e.Detail, "whether the kept grant was used") })
	if !ok || e.Event != machine.NoteLoginFailed || e.From != "Leased" {
		t.Fatalf("the unanswered lookup-self is journaled as %+v, want a %s note in Leased", e, machine.NoteLoginFailed)
	}
	h.noNote(machine.NoteTickEnd)
	var warned bool
	for _, line := range strings.Split(h.logs.String(), "\n") {
		warned = warned || strings.Contains(line, `"event":"login-failed"`) && strings.Contains(line, `"level":"warn"`)
	}
	if !warned {
		t.Errorf("no warning names login-failed:\n%s", h.logs.String())
	}
	if rec := h.record(); rec.State != "Leased" {
		t.Fatalf("state %s, want Leased", rec.State)
	}
	h.keptGrantLogsIn()
}

func TestRegistryCredentialGoesToTheAgentsDockerConfig(t *testing.T) {
	for _, shape := range []string{`{"registry": "harbor.example", "username": "robot$pull", "password": "canary-reg-pw:with:colons"}`, "robot$pull:canary-reg-pw:with:colons"} {
		t.Run(shape[:1], func(t *testing.T) {
			h := newHarness(t)
			h.sim.PutSecret(env, "registry", map[string]string{"value": shape})
			h.release("v1", withRegistryAuth)
			h.wantExit(h.tick(), 0)
			cfgFile := filepath.Join(h.cfg.DockerConfigDir(), "config.json")
			if m := testkit.Mode(t, cfgFile); m != 0o600 {
				t.Errorf("docker config mode %o", m)
			}
			if m := testkit.Mode(t, h.cfg.DockerConfigDir()); m != 0o700 {
				t.Errorf("docker config dir mode %o", m)
			}
			envText, _ := os.ReadFile(filepath.Join(h.cfg.DeployDir, "current", ".env"))
			if strings.Contains(string(envText), "canary-reg-pw") {
				t.Errorf("registry password in .env")
			}
			b, _ := os.ReadFile(h.dockerLog)
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if !strings.Contains(line, `"docker_config":"`+h.cfg.DockerConfigDir()+`"`) {
					t.Errorf("docker call without the agent's DOCKER_CONFIG: %s", line)
				}
			}
		})
	}
}

// A secret the manifest names that OpenBao does not hold fails the apply with OpenBao's own
// code, and explain names the path and what to check, not an empty fault: its fix line looks at
// that very secret (the record's subject).
func TestAMissingSecretIsExplained(t *testing.T) {
	h := newHarness(t)
	h.release("v1", func(f map[string][]byte) {
		f["secrets.manifest.json"] = []byte(`{"entries": [
  {"var": "GEMINI_API_KEY", "path": "monky/data/env-qa-02/see/gemini", "key": "value", "version": 1},
  {"var": "DB_PASSWORD", "path": "monky/data/env-qa-02/see/never-set", "key": "password"}
]}`)
	})
	h.wantExit(h.tick(), 1)
	rec := h.record()
	if rec.State != "Failed" || rec.Failure == nil || rec.Failure.Code != "KV_NOT_FOUND" || !strings.Contains(rec.Failure.Detail, "see/never-set") {
		t.Fatalf("state %s failure %+v, want Failed KV_NOT_FOUND naming the path", rec.State, rec.Failure)
	}
	doc, err := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if w := doc.Why; w == nil || w.Code != "KV_NOT_FOUND" || !strings.Contains(w.Fault, "has no data in OpenBao") ||
		!strings.Contains(w.Evidence, "see/never-set") || !strings.HasPrefix(w.Fix, "bao kv metadata get -mount=monky env-qa-02/see/never-set ") {
		t.Errorf("why = %+v", w)
	}
	if rec.Failure.Subject != "monky/data/env-qa-02/see/never-set" {
		t.Errorf("the failure's subject is %q, want the entry's path", rec.Failure.Subject)
	}
}

func TestPullFailureCarriesTheRegistrysWords(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.dockerKnob("pull-error", "Error response from daemon: no basic auth credentials")
	h.wantExit(h.tick(), 1)
	res, detail := h.lastReport()
	if res != "failed" || !strings.Contains(detail, "COMPOSE_PULL_FAILED") || !strings.Contains(detail, "no basic auth credentials") {
		t.Errorf("report %s %q", res, detail)
	}
	rec := h.record()
	if rec.State != "Failed" || rec.Failure == nil || !strings.Contains(rec.Failure.Detail, "no basic auth credentials") {
		t.Errorf("state %s failure %+v", rec.State, rec.Failure)
	}
	// backoff: the next tick waits, fetching nothing
	fetches := h.sim.Counts(env).BundleFetches
	h.wantExit(h.tick(), 1)
	if h.sim.Counts(env).BundleFetches != fetches {
		t.Errorf("a failed apply was retried before its backoff")
	}
	h.dockerKnob("pull-error", "")
	h.clock.Advance(3 * time.Minute)
	h.wantExit(h.tick(), 0)
	if c := h.sim.Counts(env); c.Leases != 1 {
		t.Errorf("leases %d: the retry reused the lease token", c.Leases)
	}
}

func TestUnhealthyAfterUpReportsFailedWithARedactedLogTail(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.dockerKnob("unhealthy", "api\n")
	h.dockerKnob("log-line", "api | using key canary-gemini-v1-Qx7")
	h.wantExit(h.tick(), 1)
	reps := h.sim.Reports(env)
	r := reps[len(reps)-1]
	if r.Result != "failed" || !strings.HasPrefix(r.Detail, "UNHEALTHY") || !strings.Contains(r.Detail, "api") {
		t.Errorf("report %s %q", r.Result, r.Detail)
	}
	if r.LogTail == "" || strings.Contains(r.LogTail, "canary-gemini") {
		t.Errorf("log tail empty or unredacted: %q", r.LogTail)
	}
}

func TestPruneKeepsTheCurrentReleaseAndKeepReleases(t *testing.T) {
	h := newHarness(t)
	var shas []string
	for _, n := range []string{"v1", "v2", "v3", "v4"} {
		shas = append(shas, h.release(n, nil))
		h.wantExit(h.tick(), 0)
	}
	a := h.agent()
	a.Prune = true
	h.sim.SetDesired(env, shas[3]) // converged: a heartbeat does not prune
	sha5 := h.release("v5", nil)
	if res := a.Tick(context.Background()); res.Exit != 0 {
		t.Fatalf("exit %d: %v", res.Exit, res.Err)
	}
	entries, _ := os.ReadDir(filepath.Join(h.cfg.DeployDir, "releases"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 3 { // keep_releases: 3, the current one included
		t.Errorf("releases kept: %v", names)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.DeployDir, "releases", sha5)); err != nil {
		t.Errorf("the current release was pruned")
	}
	found := false
	for _, c := range h.dockerCalls() {
		if strings.Contains(c, "image prune -f") {
			found = true
		}
	}
	if !found {
		t.Errorf("no docker image prune")
	}
}

func TestLeftoverStagingIsRemovedOnTheNextTick(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	left := filepath.Join(h.cfg.DeployDir, ".staging-deadbeef-0001")
	os.MkdirAll(left, 0o700)
	os.WriteFile(filepath.Join(left, ".env"), []byte("X=1"), 0o600)
	h.wantExit(h.tick(), 0)
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("leftover staging dir still there")
	}
}
