package states_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
	"github.com/tikali/monky-deployd/test/sim"
)

// TestCheckinFactsAreFresh: desired_sha is tenancy's answer at the last answered check-in,
// whatever the agent did with it (a remembered refusal included), and last_checkin_at moves at
// every answered check-in: a heartbeat, a refusal, a remembered refusal.
func TestCheckinFactsAreFresh(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	checkedAt := func(what string) {
		t.Helper()
		before := h.clock.Now()
		rec := h.record()
		if !rec.LastCheckinAt.Equal(before.Add(-time.Minute)) {
			t.Errorf("%s: last_checkin_at %v, want the tick's %v", what, rec.LastCheckinAt, before.Add(-time.Minute))
		}
	}
	h.wantExit(h.tick(), 0)
	checkedAt("heartbeat")
	bad := h.release("v2", func(f map[string][]byte) {
		f["compose.yaml"] = bytes.Replace(f["compose.yaml"], []byte("    env_file: .env\n"), []byte("    env_file: .env\n    privileged: true\n"), 1)
	})
	h.wantExit(h.tick(), 1)
	checkedAt("refusal")
	h.clock.Advance(10 * time.Minute)
	h.wantExit(h.tick(), 1)
	checkedAt("remembered refusal")
	if rec := h.record(); rec.DesiredSha != bad {
		t.Errorf("desired_sha %s after a remembered refusal, want tenancy's %s", rec.DesiredSha, bad)
	}
	st, err := explain.BuildStatus(h.st, h.clock.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.DesiredSha != bad || st.LastCheckinAt == nil || !st.LastCheckinAt.Equal(h.clock.Now().Add(-time.Minute)) {
		t.Errorf("status desired %s last check-in %v", st.DesiredSha, st.LastCheckinAt)
	}
}

// TestAStateFileMovedAsideIsNamed: a corrupt state file moved aside is named by status (text
// and --json) and kept by the NDJSON export; the fresh file's first tick says it started afresh,
// and never "0.1.x" when no state.json was imported.
func TestAStateFileMovedAsideIsNamed(t *testing.T) {
	h := newHarness(t)
	h.apply("v1")
	if err := os.WriteFile(h.cfg.StatePath(), bytes.Repeat([]byte("not a bolt file "), 512), 0o600); err != nil {
		t.Fatal(err)
	}
	h.reload() // what the next run does: the corrupt file goes aside
	h.wantExit(h.tick(), 0)
	var first store.Entry
	if err := h.st.View(func(tx store.Tx) error {
		es, err := tx.Entries(1)
		if len(es) > 0 {
			first = es[0]
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.Detail, "started afresh: the state file was unusable") || !strings.Contains(first.Detail, ".corrupt-") || strings.Contains(first.Detail, "0.1.x") {
		t.Errorf("the fresh file's first entry: %q", first.Detail)
	}
	st, err := explain.BuildStatus(h.st, h.clock.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.MovedAside == nil || !strings.Contains(st.MovedAside.Path, ".corrupt-") {
		t.Fatalf("status: state_file_moved_aside %+v", st.MovedAside)
	}
	var text strings.Builder
	explain.WriteStatusText(&text, st)
	if !strings.Contains(text.String(), "state file: started afresh at") || !strings.Contains(text.String(), st.MovedAside.Path) {
		t.Errorf("status text does not name the moved-aside file:\n%s", text.String())
	}
	var nd bytes.Buffer
	if err := explain.WriteNDJSON(&nd, h.st, h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	back, err := explain.ReadNDJSON(&nd)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := explain.Build(back, explain.Options{Now: h.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if doc.MovedAside == nil || doc.MovedAside.Path != st.MovedAside.Path {
		t.Errorf("the export lost the moved-aside file: %+v", doc.MovedAside)
	}
}

// TestALeaseTenancyRefuses: a lease tenancy refuses (429) is journaled with its code in the
// entry's code field (here the transition that applies with the bootstrap token instead), and
// status shows tenancy's refusal and lease_retry_after, not only the agent's own budget.
func TestALeaseTenancyRefuses(t *testing.T) {
	h := newHarness(t)
	h.sim.Fail(sim.FailRule{Path: "/v1/agent/lease", Status: 429, Message: "0 leases per environment per hour", RetryAfter: "1800"})
	h.release("v1", nil)
	h.wantExit(h.tick(), 0)
	e, ok := h.entry(func(e store.Entry) bool { return strings.Contains(e.Detail, "0 leases per environment per hour") })
	if !ok || e.Code != vocab.LeaseRateLimited {
		t.Errorf("the refused lease's entry: %+v", e)
	}
	st, err := explain.BuildStatus(h.st, h.clock.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.LeaseRetryAfter == nil || st.LeaseRetryAfter.Sub(h.clock.Now()) < 25*time.Minute {
		t.Errorf("lease_retry_after %v", st.LeaseRetryAfter)
	}
	var text strings.Builder
	explain.WriteStatusText(&text, st)
	if !strings.Contains(text.String(), "tenancy refused a lease") || !strings.Contains(text.String(), "0 leases per environment per hour") {
		t.Errorf("status text lacks tenancy's refusal:\n%s", text.String())
	}
	if st.Verdict != explain.Working || len(st.Codes) == 0 || st.Codes[0] != string(vocab.LeaseRateLimited) {
		t.Errorf("verdict %s codes %v", st.Verdict, st.Codes)
	}
}

// TestTokenTTLWordsMatchTheRecord: the journal's ttl for a token is the one the record's
// expiry was computed from (a 30 s ttl read "1m0s" where the record said 30 s).
func TestTokenTTLWordsMatchTheRecord(t *testing.T) {
	h := newHarness(t, func(o *sim.Options) { o.TokenTTL = 30 * time.Second })
	h.release("v1", nil)
	h.tick()
	e, ok := h.entry(func(e store.Entry) bool { return e.Event == machine.NoteBootstrap })
	if !ok || !strings.Contains(e.Detail, "(ttl 30s)") {
		t.Errorf("bootstrap entry %q, want ttl 30s", e.Detail)
	}
}

// TestLoginFailedHasACode: OpenBao that cannot answer the login after a lease is journaled as
// login-failed with a code (BAO_UNAVAILABLE), not with none.
func TestLoginFailedHasACode(t *testing.T) {
	h := newHarness(t, func(o *sim.Options) { o.TokenTTL = 2 * time.Hour; o.TokenMaxTTL = 2 * time.Hour })
	h.apply("v1")
	h.sim.Fail(sim.FailRule{Path: "/v1/auth/jwt-tenancy/login", Status: 503, Message: "Vault is sealed"})
	h.release("v2", nil)
	h.wantExit(h.tick(), 75)
	e, ok := h.entry(func(e store.Entry) bool { return e.Event == machine.NoteLoginFailed })
	if !ok || e.Code == "" {
		t.Errorf("login-failed entry %+v, want a code", e)
	}
}

// TestAPurgeSaysWhatAskedForIt: a retire that removes volumes names what asked for it —
// tenancy's purge_volumes, or volumes_on_absent: purge in this box's config.
func TestAPurgeSaysWhatAskedForIt(t *testing.T) {
	for _, c := range []struct {
		name   string
		purge  bool
		config string
		want   string
	}{{"tenancy", true, "", "asked by tenancy's purge_volumes"}, {"config", false, "volumes_on_absent: purge\n", "asked by volumes_on_absent: purge in "}} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			if c.config != "" {
				h.appendConfig(c.config)
			}
			h.apply("v1")
			if err := h.sim.Retire(env, c.purge); err != nil {
				t.Fatal(err)
			}
			h.wantExit(h.tick(), 0)
			e, ok := h.entry(func(e store.Entry) bool { return e.To == "Down" && e.From != e.To })
			if !ok || !strings.Contains(e.Detail, "volumes purged, "+c.want) {
				t.Errorf("the down entry %q lacks %q", e.Detail, c.want)
			}
		})
	}
}
