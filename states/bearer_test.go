package states_test

import (
	"os"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
	"github.com/tikali/monky-deployd/test/sim"
)

// PROTOCOL.md §1's 401 and 403 rows hold for every call, not the check-in alone.

// A call refused for its bearer with a fresh grant on disk: the token is dropped, the grant
// logs in, and the apply goes on in the same tick, its report delivered.
//   - a 401 on the lease: it used to fail the apply and keep the refused token;
//   - a 401 on the report: logged in again and the report delivered;
//   - OpenBao's 403 on a KV read with a token it no longer honours (lookup-self refused too):
//     the read is made again; it used to fail the apply (BAO_PERMISSION_DENIED) with the dead
//     token kept.
func TestRefusedBearerRebootstrapsInTheSameTick(t *testing.T) {
	for _, c := range []struct {
		name  string
		fails []sim.FailRule
	}{
		{"lease 401", []sim.FailRule{{Path: "/v1/agent/lease", Status: 401, Code: "AGENT_UNAUTHENTICATED", Times: 1}}},
		{"report 401", []sim.FailRule{{Path: "/v1/agent/report", Status: 401, Code: "AGENT_UNAUTHENTICATED", Times: 1}}},
		{"kv read 403", []sim.FailRule{
			{Path: "/v1/monky/data/" + env + "/see/", Status: 403, Message: "permission denied", Times: 1},
			{Path: "/v1/auth/token/lookup-self", Status: 403, Message: "permission denied", Times: 1},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.wantExit(h.tick(), 0) // logs in with the kit's grant; nothing desired yet
			h.freshGrant()
			h.release("v1", nil)
			for _, f := range c.fails {
				h.sim.Fail(f)
			}
			h.wantExit(h.tick(), 0)
			if rec := h.record(); rec.State != "Reported" || rec.AppliedSha == "" || rec.Failure != nil {
				t.Fatalf("state %s applied %q failure %+v", rec.State, rec.AppliedSha, rec.Failure)
			}
			if res, _ := h.lastReport(); res != "applied" {
				t.Errorf("last report %q, want applied", res)
			}
			h.wantGone(h.cfg.BootstrapPath, "the fresh grant was not used")
		})
	}
}

// A 401 on the lease or on the bundle and no grant on disk: the token is deleted and the
// machine blocks.
func TestUnauthenticatedCallWithoutAGrantBlocks(t *testing.T) {
	for _, path := range []string{"/v1/agent/lease", "/v1/agent/bundle/"} {
		t.Run(path, func(t *testing.T) {
			h := newHarness(t)
			h.release("v1", nil)
			h.sim.Fail(sim.FailRule{Path: path, Status: 401, Code: "AGENT_UNAUTHENTICATED"})
			h.wantExit(h.tick(), 1)
			h.wantBlocked("AGENT_UNAUTHENTICATED")
			h.wantGone(h.cfg.TokenPath(), "refused token kept")
		})
	}
}

// A 403 AGENT_ENV_MISMATCH on the report: exit 78, and the next tick is Blocked and touches no
// network (it used to check in again and exit 78 every tick).
func TestEnvMismatchOnReportBlocks(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.sim.Fail(sim.FailRule{Path: "/v1/agent/report", Status: 403, Code: "AGENT_ENV_MISMATCH"})
	h.wantExit(h.tick(), 78)
	h.wantBlocked("AGENT_ENV_MISMATCH")
	before := h.sim.Counts(env)
	h.wantExit(h.tick(), 78)
	if after := h.sim.Counts(env); after != before {
		t.Errorf("a blocked tick touched the network: %+v → %+v", before, after)
	}
}

// A 403 on a KV read while the token is fine (lookup-self answers): the path is refused, the
// apply fails as before and the token stays.
func TestKVReadRefusedPathFailsTheApply(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.sim.Fail(sim.FailRule{Path: "/v1/monky/data/" + env + "/see/db", Status: 403, Message: "permission denied"})
	h.wantExit(h.tick(), 1)
	if rec := h.record(); rec.State != "Failed" || rec.Failure == nil || rec.Failure.Code != "BAO_PERMISSION_DENIED" {
		t.Errorf("state %s failure %+v", rec.State, rec.Failure)
	}
	if _, err := os.Stat(h.cfg.TokenPath()); err != nil {
		t.Errorf("the token was dropped: %v", err)
	}
}

// A report tenancy answered with 403 was sent: the outbox counts it, so the evidence does not
// say "sent 0 time(s)" beside a block entry that says the report got a 403.
func TestReportThatGotA403CountsAsSent(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.sim.Fail(sim.FailRule{Path: "/v1/agent/report", Status: 403, Code: "AGENT_ENV_MISMATCH"})
	h.wantExit(h.tick(), 78)
	h.wantBlocked("AGENT_ENV_MISMATCH")
	var q []store.QueuedReport
	if err := h.st.View(func(tx store.Tx) error {
		var err error
		q, err = tx.Outbox()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(q) != 1 || q[0].Attempts != 1 {
		t.Fatalf("outbox %+v, want one report sent once", q)
	}
	doc, err := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range append([]explain.Why{*doc.Why}, doc.Also...) {
		if strings.Contains(w.Evidence, "sent 0 time") {
			t.Errorf("%s: %s", w.Code, w.Evidence)
		}
	}
}
