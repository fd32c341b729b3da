package states_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/machine/explain"
)

func TestEnvMismatchBlocksWithoutAStorm(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	// the config now names another env than the token is pinned to
	h.rewriteConfig(`env_id: "env-qa-02"`, `env_id: "env-qa-03"`)
	h.wantExit(h.tick(), 78)
	h.wantBlocked("AGENT_ENV_MISMATCH")
	checkins := h.sim.Counts(env).Checkins
	for i := 0; i < 3; i++ {
		h.wantExit(h.tick(), 78)
	}
	if got := h.sim.Counts(env).Checkins; got != checkins {
		t.Errorf("a blocked machine checked in %d more times", got-checkins)
	}
	doc, _ := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
	if !strings.Contains(doc.Next, "AGENT_ENV_MISMATCH") || !strings.Contains(doc.Next, "78") {
		t.Errorf("next %q", doc.Next)
	}
	// fixing the config unblocks by itself
	h.rewriteConfig(`env_id: "env-qa-03"`, `env_id: "env-qa-02"`)
	h.wantConverged("after the fix")
}

func TestUnauthenticatedWithoutAGrantBlocksUntilANewKit(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	// a kit re-reveal supersedes the grant the token came from; the new grant is not on this box
	if _, err := h.sim.RevealKit(env); err != nil {
		t.Fatal(err)
	}
	h.wantExit(h.tick(), 1)
	h.wantBlocked("AGENT_UNAUTHENTICATED")
	h.wantGone(h.cfg.TokenPath(), "refused token kept")
	checkins := h.sim.Counts(env).Checkins
	h.wantExit(h.tick(), 1)
	if h.sim.Counts(env).Checkins != checkins {
		t.Errorf("a blocked machine checked in")
	}
	doc, _ := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
	if !strings.Contains(doc.Next, "re-run the install kit") {
		t.Errorf("next %q", doc.Next)
	}
	// a fresh kit's grant on disk unblocks, logs in and converges in one tick
	grant, _ := h.sim.RevealKit(env)
	h.putGrant(grant)
	h.wantExit(h.tick(), 0)
	if rec := h.record(); rec.State != "Reported" || rec.Token.Source != "bootstrap" {
		t.Errorf("state %s token %s", rec.State, rec.Token.Source)
	}
}

func TestUnauthenticatedWithAFreshGrantBootstrapsInTheSameTick(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	grant, _ := h.sim.RevealKit(env)
	h.putGrant(grant)
	h.wantExit(h.tick(), 0)
	if _, err := os.Stat(filepath.Join(h.kit, "bootstrap.jwt")); !os.IsNotExist(err) {
		t.Errorf("grant not consumed")
	}
}

func TestAFreshGrantBesideAWorkingTokenIsLeftAlone(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	grant, _ := h.sim.MintGrant(env, 3600e9)
	h.putGrant(grant)
	logins := h.sim.Counts(env).Logins
	h.wantExit(h.tick(), 0)
	if h.sim.Counts(env).Logins != logins {
		t.Errorf("the grant was used while the token works")
	}
	if _, err := os.Stat(filepath.Join(h.kit, "bootstrap.jwt")); err != nil {
		t.Errorf("grant removed: %v", err)
	}
}

func TestAppRoleLeaseShapeIsRefusedLoudly(t *testing.T) {
	h := newHarness(t)
	h.sim.SetLeaseShape(env, "approle")
	h.release("v1", nil)
	h.wantExit(h.tick(), 1)
	res, detail := h.lastReport()
	if res != "failed" || !strings.HasPrefix(detail, "LEASE_SHAPE") {
		t.Errorf("report %s %q", res, detail)
	}
	for _, c := range h.composeCalls() {
		if strings.Contains(c, " up") {
			t.Errorf("compose up after LEASE_SHAPE")
		}
	}
}

func TestTemporaryCheckinFailureKeepsTheStateAndExits75(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	h.sim.Fail(simFail("/v1/agent/checkin", 503, "", ""))
	h.wantExit(h.tick(), 75)
	if rec := h.record(); rec.State != "Reported" {
		t.Errorf("state %s", rec.State)
	}
	h.sim.ClearFails()
	h.wantExit(h.tick(), 0)
}

func TestLaptopModeOfflineExitsZero(t *testing.T) {
	h := newHarness(t)
	h.appendConfig("laptop_mode: true\n")
	h.apply("v1")
	h.sim.Fail(simFail("/v1/agent/checkin", 0, "", ""))
	h.wantExit(h.tick(), 0)
}

func TestReportOutboxSurvivesATenancyOutage(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.sim.Fail(simFail("/v1/agent/report", 503, "", ""))
	h.wantExit(h.tick(), 75)
	if rec := h.record(); rec.State != "Healthy" || rec.LastReport == nil || rec.LastReport.Acknowledged {
		t.Fatalf("state %s last report %+v", rec.State, rec.LastReport)
	}
	h.sim.ClearFails()
	h.wantExit(h.tick(), 0)
	applied := 0
	for _, r := range h.sim.Reports(env) {
		if r.Result == "applied" {
			applied++
		}
	}
	if applied != 2 { // the queued apply report, then this tick's heartbeat
		t.Errorf("%d applied reports, want 2", applied)
	}
	if rec := h.record(); rec.State != "Reported" || !rec.LastReport.Acknowledged {
		t.Errorf("state %s", rec.State)
	}
}

func TestAReportTenancyRefusesForGoodIsDropped(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.sim.Fail(simFailTimes("/v1/agent/report", 422, 1))
	h.wantExit(h.tick(), 0)
	h.wantExit(h.tick(), 0)
	var outbox int
	if st, err := explain.BuildStatus(h.st, h.clock.Now(), nil); err == nil {
		outbox = st.Outbox
	}
	if outbox != 0 {
		t.Errorf("%d report(s) stuck in the outbox", outbox)
	}
}

func TestTheJournalIsBoundedByRetention(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	for i := 0; i < 125; i++ {
		// alternate a failed and a good check-in so no tick folds into the one before
		if i%2 == 1 {
			h.sim.Fail(simFail("/v1/agent/checkin", 503, "", ""))
		} else {
			h.sim.ClearFails()
		}
		a := h.agent()
		a.Retention.MaxTicks, a.Retention.MaxAge = 10, 24*time.Hour
		a.Tick(context.Background())
		h.clock.Advance(time.Minute)
	}
	doc, err := explain.Build(h.st, explain.Options{N: 1000, Now: h.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	// pruned at tick 120 to 10 (and the newest notable apply); 5 more since
	if n := len(doc.Ticks); n > 20 {
		t.Errorf("%d ticks kept, retention keeps 10 (pruned every %d ticks)", n, 60)
	}
	if doc.Ticks[0].Action != "apply" {
		t.Errorf("the apply was pruned: oldest kept tick %d is %q", doc.Ticks[0].Tick, doc.Ticks[0].Action)
	}
}
