package states_test

import (
	"os"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/sim"
)

// PROTOCOL.md §1's 401 and 403 rows hold for every call, not the check-in alone.

// A 401 on the lease with a fresh grant on disk: the token is dropped, the grant logs in, and
// the apply goes on in the same tick (it used to fail the apply and keep the refused token).
func TestUnauthenticatedLeaseRebootstrapsInTheSameTick(t *testing.T) {
	h := newHarness(t)
	h.wantExit(h.tick(), 0) // logs in with the kit's grant; nothing desired yet
	h.freshGrant()
	h.release("v1", nil)
	h.sim.Fail(sim.FailRule{Path: "/v1/agent/lease", Status: 401, Code: "AGENT_UNAUTHENTICATED", Times: 1})
	h.wantExit(h.tick(), 0)
	if rec := h.record(); rec.State != "Reported" || rec.AppliedSha == "" {
		t.Fatalf("state %s applied %q", rec.State, rec.AppliedSha)
	}
	if _, err := os.Stat(h.cfg.BootstrapPath); !os.IsNotExist(err) {
		t.Errorf("the fresh grant was not used: %v", err)
	}
}

// A 401 on the lease and no grant on disk: the token is deleted and the machine blocks.
func TestUnauthenticatedLeaseWithoutAGrantBlocks(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.sim.Fail(sim.FailRule{Path: "/v1/agent/lease", Status: 401, Code: "AGENT_UNAUTHENTICATED"})
	h.wantExit(h.tick(), 1)
	rec := h.record()
	if rec.State != "Blocked" || rec.Block == nil || rec.Block.Code != "AGENT_UNAUTHENTICATED" {
		t.Fatalf("state %s block %+v", rec.State, rec.Block)
	}
	if _, err := os.Stat(h.cfg.TokenPath()); !os.IsNotExist(err) {
		t.Errorf("refused token kept: %v", err)
	}
}

// A 401 on the bundle: the same.
func TestUnauthenticatedBundleBlocks(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.sim.Fail(sim.FailRule{Path: "/v1/agent/bundle/", Status: 401, Code: "AGENT_UNAUTHENTICATED"})
	h.wantExit(h.tick(), 1)
	rec := h.record()
	if rec.State != "Blocked" || rec.Block == nil || rec.Block.Code != "AGENT_UNAUTHENTICATED" {
		t.Fatalf("state %s block %+v", rec.State, rec.Block)
	}
	if _, err := os.Stat(h.cfg.TokenPath()); !os.IsNotExist(err) {
		t.Errorf("refused token kept: %v", err)
	}
}

// A 403 AGENT_ENV_MISMATCH on the report: exit 78, and the next tick is Blocked and touches no
// network (it used to check in again and exit 78 every tick).
func TestEnvMismatchOnReportBlocks(t *testing.T) {
	h := newHarness(t)
	h.release("v1", nil)
	h.sim.Fail(sim.FailRule{Path: "/v1/agent/report", Status: 403, Code: "AGENT_ENV_MISMATCH"})
	h.wantExit(h.tick(), 78)
	rec := h.record()
	if rec.State != "Blocked" || rec.Block == nil || rec.Block.Code != "AGENT_ENV_MISMATCH" {
		t.Fatalf("state %s block %+v", rec.State, rec.Block)
	}
	before := h.sim.Counts(env)
	h.wantExit(h.tick(), 78)
	if after := h.sim.Counts(env); after != before {
		t.Errorf("a blocked tick touched the network: %+v → %+v", before, after)
	}
}

// A 401 on the report with a fresh grant on disk: logged in again and the report delivered in
// the same tick.
func TestUnauthenticatedReportRebootstrapsAndDelivers(t *testing.T) {
	h := newHarness(t)
	h.wantExit(h.tick(), 0)
	h.freshGrant()
	h.release("v1", nil)
	h.sim.Fail(sim.FailRule{Path: "/v1/agent/report", Status: 401, Code: "AGENT_UNAUTHENTICATED", Times: 1})
	h.wantExit(h.tick(), 0)
	if res, _ := h.lastReport(); res != "applied" {
		t.Errorf("last report %q, want applied", res)
	}
	if rec := h.record(); rec.State != "Reported" {
		t.Errorf("state %s", rec.State)
	}
}

// freshGrant puts a fresh bootstrap grant on disk (beside a working token it is left alone).
func (h *harness) freshGrant() {
	h.t.Helper()
	grant, err := h.sim.MintGrant(env, time.Hour)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(h.cfg.BootstrapPath, []byte(grant+"\n"), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

// OpenBao's 403 on a KV read with a token it no longer honours (lookup-self refused too): the
// token is dropped and a fresh grant logs in, the read is made again and the apply goes on in the
// same tick. It used to fail the apply (BAO_PERMISSION_DENIED) with the dead token kept.
func TestKVReadWithARefusedTokenRebootstraps(t *testing.T) {
	h := newHarness(t)
	h.wantExit(h.tick(), 0)
	h.freshGrant()
	h.release("v1", nil)
	h.sim.Fail(sim.FailRule{Path: "/v1/monky/data/" + env + "/see/", Status: 403, Message: "permission denied", Times: 1})
	h.sim.Fail(sim.FailRule{Path: "/v1/auth/token/lookup-self", Status: 403, Message: "permission denied", Times: 1})
	h.wantExit(h.tick(), 0)
	if rec := h.record(); rec.State != "Reported" || rec.Failure != nil {
		t.Errorf("state %s failure %+v", rec.State, rec.Failure)
	}
	if _, err := os.Stat(h.cfg.BootstrapPath); !os.IsNotExist(err) {
		t.Errorf("the fresh grant was not used: %v", err)
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
