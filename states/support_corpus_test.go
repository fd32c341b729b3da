package states_test

import (
	"archive/tar"
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
	"github.com/tikali/monky-deployd/test/sim"
)

var updateSupport = flag.Bool("update-support", false, "write testdata/support/*.db from the scenarios (then: go test ./cmd/monky-deployd -run Support -update)")

const supportDir = "../testdata/support"

// supportCase is one box in trouble, brought there by real ticks of the real engine against
// the simulator and the docker stub.
type supportCase struct {
	name string
	code string // the code explain's why names ("": none, the box converged)
	// verdict, when set, is the one verdict the copy reads; codes, when set, every active code
	verdict string
	codes   []string
	// sentAfter, when set, reads the copy that long after its newest tick (the box sent it
	// then): testdata/support/<name>.asof holds that time for status and explain --as-of.
	sentAfter time.Duration
	sim       func(*sim.Options)
	run       func(h *harness)
	// next runs the next tick and checks that what explain says happens next, happens.
	next func(h *harness)
}

func (h *harness) wantTicks(n, exit int) {
	h.t.Helper()
	for i := 0; i < n; i++ {
		h.wantExit(h.tick(), exit)
	}
}

// failedTicks runs n ticks that must each exit 1, moving the clock on by gap after each (past
// the backoff, so each is an attempt).
func (h *harness) failedTicks(n int, gap time.Duration) {
	h.t.Helper()
	for i := 0; i < n; i++ {
		h.wantExit(h.tick(), 1)
		h.clock.Advance(gap)
	}
}

// noNetwork runs a tick and checks it did not check in.
func (h *harness) noCheckin(exit int) {
	h.t.Helper()
	before := h.sim.Counts(env).Checkins
	h.wantExit(h.tick(), exit)
	if got := h.sim.Counts(env).Checkins; got != before {
		h.t.Errorf("the next tick checked in (%d → %d)", before, got)
	}
}

// sameRefusal runs a tick and checks the refused sha was not fetched again.
func (h *harness) sameRefusal() {
	h.t.Helper()
	before := h.sim.Counts(env).BundleFetches
	h.wantExit(h.tick(), 1)
	if got := h.sim.Counts(env).BundleFetches; got != before {
		h.t.Errorf("the refused sha was fetched again (%d → %d)", before, got)
	}
}

// entry is the newest journal entry match says yes to.
func (h *harness) entry(match func(store.Entry) bool) (store.Entry, bool) {
	h.t.Helper()
	var found store.Entry
	ok := false
	if err := h.st.View(func(tx store.Tx) error {
		return tx.AllEntries(func(e store.Entry) error {
			if match(e) {
				found, ok = e, true
			}
			return nil
		})
	}); err != nil {
		h.t.Fatal(err)
	}
	return found, ok
}

// noNote fails the test when the journal holds an entry of event.
func (h *harness) noNote(event string) {
	h.t.Helper()
	if e, ok := h.entry(func(e store.Entry) bool { return e.Event == event }); ok {
		h.t.Fatalf("unexpected %s entry: %+v", event, e)
	}
}

func supportCases(t *testing.T) []supportCase {
	compose := "services:\n  api:\n    image: x\n"
	return []supportCase{
		{name: "refused-privileged", code: "PRIVILEGED_REFUSED", run: func(h *harness) {
			h.apply("v1")
			h.release("v2", func(f map[string][]byte) {
				f["compose.yaml"] = bytes.Replace(f["compose.yaml"], []byte("    env_file: .env\n"), []byte("    env_file: .env\n    privileged: true\n"), 1)
			})
			h.wantExit(h.tick(), 1)
		}, next: (*harness).sameRefusal},
		{name: "refused-rollback", code: "ROLLBACK_REFUSED", run: func(h *harness) {
			h.apply("v1")
			h.apply("v2")
			if _, err := h.sim.SetDesiredRelease(env, "v1"); err != nil {
				h.t.Fatal(err)
			}
			h.wantExit(h.tick(), 1)
		}, next: (*harness).sameRefusal},
		{name: "refused-bundle-invalid", code: "BUNDLE_INVALID", run: func(h *harness) {
			files := testkit.Bundle(env, map[string]string{"compose.yaml": compose})
			arch := testkit.Tar(t, append(testkit.TarFiles(files), testkit.TarEntry{Header: tar.Header{Name: "evil", Linkname: "/etc/passwd", Typeflag: tar.TypeSymlink}})...)
			sha := "aa" + shaOf(files)[2:]
			h.sim.AddRawRelease(env, "bad", sha, arch)
			if err := h.sim.SetDesired(env, sha); err != nil {
				h.t.Fatal(err)
			}
			h.wantExit(h.tick(), 1)
		}, next: (*harness).sameRefusal},
		{name: "refused-sha-mismatch", code: "BUNDLE_SHA_MISMATCH", run: func(h *harness) {
			files := testkit.Bundle(env, map[string]string{"compose.yaml": compose})
			sha := strings.Repeat("ab", 32)
			h.sim.AddRawRelease(env, "bad", sha, testkit.Tar(t, testkit.TarFiles(files)...))
			if err := h.sim.SetDesired(env, sha); err != nil {
				h.t.Fatal(err)
			}
			h.wantExit(h.tick(), 1)
		}, next: (*harness).sameRefusal},
		{name: "refused-env-incomplete", code: "ENV_INCOMPLETE", run: func(h *harness) {
			h.release("v1", func(f map[string][]byte) {
				f[".env.template"] = append(f[".env.template"], "SENTRY_DSN=${SENTRY_DSN}\n"...)
			})
			h.wantExit(h.tick(), 1)
		}, next: (*harness).sameRefusal},
		{name: "refused-manifest-path", code: "MANIFEST_PATH_REFUSED", run: func(h *harness) {
			h.release("v1", func(f map[string][]byte) {
				f["secrets.manifest.json"] = []byte(`{"entries": [
  {"var": "GEMINI_API_KEY", "path": "monky/data/env-prod-01/see/gemini"},
  {"var": "DB_PASSWORD", "path": "monky/data/env-qa-02/see/db", "key": "password"}]}`)
			})
			h.wantExit(h.tick(), 1)
		}, next: (*harness).sameRefusal},
		{name: "refused-disk-full", code: "DISK_INSUFFICIENT", run: func(h *harness) {
			h.disk.free = 1 << 30
			h.release("v1", func(f map[string][]byte) { f["bundle.json"] = []byte(`{"disk_need_bytes": 3221225472}`) })
			h.wantExit(h.tick(), 1)
		}, next: func(h *harness) {
			// measured again every tick: once the space is there, the apply goes on by itself
			h.wantExit(h.tick(), 1)
			h.disk.free = 500 << 30
			h.wantExit(h.tick(), 0)
		}},
		{name: "refused-disk-1pib", code: "DISK_INSUFFICIENT", run: func(h *harness) {
			h.release("v1", func(f map[string][]byte) { f["bundle.json"] = []byte(`{"disk_need_bytes": 1125899906842624}`) })
			h.wantExit(h.tick(), 1)
		}, next: func(h *harness) { h.wantExit(h.tick(), 1) }},
		{name: "failed-pull", code: "COMPOSE_PULL_FAILED", run: func(h *harness) {
			h.dockerKnob("pull-error", `Error response from daemon: Head "https://harbor.example/v2/monky/api/manifests/v1": no basic auth credentials`)
			h.release("v1", nil)
			h.wantExit(h.tick(), 1)
		}, next: func(h *harness) {
			// retry at the backoff's time, not before
			h.wantExit(h.tick(), 1)
			if rec := h.record(); rec.TotalAttempts() != 1 {
				h.t.Errorf("retried before the backoff: %d attempts", rec.TotalAttempts())
			}
			h.clock.Advance(2 * time.Minute)
			h.wantExit(h.tick(), 1)
			if rec := h.record(); rec.TotalAttempts() != 2 {
				h.t.Errorf("no retry after the backoff: %d attempts", rec.TotalAttempts())
			}
		}},
		{name: "failed-parked", code: "COMPOSE_UP_FAILED", run: func(h *harness) {
			h.dockerKnob("up-error", "Error response from daemon: driver failed programming external connectivity on endpoint monky-env-qa-02-api-1: Bind for 0.0.0.0:8080 failed: port is already allocated")
			h.release("v1", nil)
			h.failedTicks(5, 31*time.Minute)
			if rec := h.record(); !rec.Parked {
				h.t.Fatalf("not parked after 5 attempts: %+v", rec)
			}
		}, next: func(h *harness) {
			h.clock.Advance(time.Hour)
			n := len(h.composeCalls())
			h.wantExit(h.tick(), 1)
			if got := len(h.composeCalls()); got != n {
				h.t.Errorf("a parked flight ran compose: %v", h.composeCalls()[n:])
			}
		}},
		{name: "resume-then-failed", code: "COMPOSE_UP_FAILED", run: func(h *harness) {
			h.dockerKnob("up-error", "Error response from daemon: Bind for 0.0.0.0:8080 failed: port is already allocated")
			h.release("v1", nil)
			h.failedTicks(5, 31*time.Minute)
			a := h.agent()
			a.Operator = "uid 1000 (alice)"
			if _, err := a.Resume(false); err != nil {
				h.t.Fatal(err)
			}
			// resume is a tick of its own, saying who ran it
			e, ok := h.entry(func(e store.Entry) bool { return e.Event == "resume" })
			var sum store.TickSummary
			_ = h.st.View(func(tx store.Tx) error { sum, _, _ = tx.GetTick(e.Tick); return nil })
			if !ok || sum.Action != "resume" || !strings.Contains(e.Detail, "resume by uid 1000 (alice)") || !strings.Contains(e.Detail, "COMPOSE_UP_FAILED") {
				h.t.Errorf("resume entry %+v in tick %+v", e, sum)
			}
			h.clock.Advance(time.Minute)
			h.wantExit(h.tick(), 1)
		}, next: func(h *harness) { h.wantExit(h.tick(), 1) }},
		{name: "failed-unhealthy-apply", code: "UNHEALTHY", run: func(h *harness) {
			h.dockerKnob("unhealthy", "api\n")
			h.release("v1", nil)
			h.wantExit(h.tick(), 1)
			// the step's duration is its whole wall time, the health wait included
			if e, ok := h.entry(func(e store.Entry) bool { return e.From == "Up" && e.To == "Failed" }); !ok || e.Ms < 300000 {
				h.t.Errorf("Up → Failed took %dms, want the 300 s health wait", e.Ms)
			}
		}, next: func(h *harness) { h.wantExit(h.tick(), 1) }},
		{name: "unhealthy-heartbeat", code: "UNHEALTHY", run: func(h *harness) {
			h.apply("v1")
			h.wantTicks(2, 0)
			h.dockerKnob("unhealthy", "api\n")
			h.wantExit(h.tick(), 1)
		}, next: func(h *harness) {
			h.wantExit(h.tick(), 1)
			if res, _ := h.lastReport(); res != "failed" {
				h.t.Errorf("the next heartbeat reported %q", res)
			}
		}},
		{name: "blocked-env-mismatch", code: "AGENT_ENV_MISMATCH", run: func(h *harness) {
			h.apply("v1")
			h.rewriteConfig(`env_id: "env-qa-02"`, `env_id: "env-qa-03"`)
			h.wantExit(h.tick(), 78)
		}, next: func(h *harness) { h.noCheckin(78) }},
		{name: "blocked-unauthenticated", code: "AGENT_UNAUTHENTICATED", run: func(h *harness) {
			h.apply("v1")
			h.sim.RevokeTokens(env)
			h.wantExit(h.tick(), 1)
		}, next: func(h *harness) {
			h.noCheckin(1)
			h.freshGrant()
			h.wantExit(h.tick(), 0)
		}},
		{name: "token-renew-refused-blocked", code: "BAO_PERMISSION_DENIED", run: func(h *harness) {
			h.apply("v1")
			h.sim.Fail(sim.FailRule{Path: "/v1/auth/token/renew-self", Status: 403, Message: "permission denied"})
			h.clock.Advance(23 * time.Hour)
			h.wantExit(h.tick(), 1)
		}, next: func(h *harness) { h.noCheckin(1) }},
		{name: "dying-token", code: "BAO_PERMISSION_DENIED",
			sim: func(o *sim.Options) { o.TokenTTL = time.Minute },
			run: func(h *harness) {
				h.sim.Fail(sim.FailRule{Path: "/v1/auth/token/renew-self", Status: 403, Message: "permission denied"})
				h.apply("v1")
				for i := 0; i < 3; i++ {
					h.freshGrant() // a grant the install kit puts back, every tick
					h.wantExit(h.tick(), 0)
				}
				// OpenBao's refusal is named as OpenBao's, not as tenancy's 401
				if e, ok := h.entry(func(e store.Entry) bool { return e.Event == "unauthenticated" }); !ok || e.Code != "BAO_PERMISSION_DENIED" || !strings.Contains(e.Detail, "OpenBao refused") {
					h.t.Errorf("renew-self refusal journaled as %+v", e)
				}
			}, next: func(h *harness) {
				// the same refusal at the next tick: the token is deleted and made again
				h.freshGrant()
				before := h.sim.Counts(env).Logins
				h.wantExit(h.tick(), 0)
				if h.sim.Counts(env).Logins == before {
					h.t.Errorf("the next tick did not log in again")
				}
			}},
		{name: "token-expiring", code: "TOKEN_EXPIRING",
			sim: func(o *sim.Options) { o.TokenMaxTTL = 2 * time.Hour; o.TokenTTL = 2 * time.Hour },
			run: func(h *harness) {
				// no lease to be had: the token can only be renewed, up to its max ttl
				h.sim.Fail(sim.FailRule{Path: "/v1/agent/lease", Status: 503, Message: "lease backend unavailable"})
				h.apply("v1")
				h.clock.Advance(50 * time.Minute)
				h.wantExit(h.tick(), 0)
				h.clock.Advance(58 * time.Minute)
				h.wantExit(h.tick(), 0)
			}, next: func(h *harness) {
				// nothing renews it: past its expiry the box loses OpenBao
				h.clock.Advance(15 * time.Minute)
				h.tick()
				if rec := h.record(); rec.State != "Blocked" {
					h.t.Errorf("past the expiry: state %s", rec.State)
				}
			}},
		{name: "lease-every-tick", code: "LEASE_EVERY_TICK",
			sim: func(o *sim.Options) { o.TokenMaxTTL = 2 * time.Hour; o.TokenTTL = 2 * time.Hour },
			run: func(h *harness) {
				h.apply("v1")
				h.wantTicks(3, 0)
			}, next: func(h *harness) {
				before := h.sim.Counts(env).Leases
				h.wantExit(h.tick(), 0)
				if h.sim.Counts(env).Leases == before {
					h.t.Errorf("the next tick did not lease")
				}
			}},
		{name: "lease-budget-spent", code: "LEASE_BUDGET", run: func(h *harness) {
			h.sim.Fail(sim.FailRule{Path: "/v1/agent/lease", Status: 503, Message: "lease backend unavailable"})
			for _, v := range []string{"v1", "v2", "v3", "v4", "v5"} {
				h.apply(v)
				h.wantExit(h.tick(), 0)
			}
		}, next: func(h *harness) {
			h.sim.ClearFails()
			h.release("v6", nil)
			before := h.sim.Counts(env).Leases
			h.wantExit(h.tick(), 0)
			if h.sim.Counts(env).Leases != before {
				h.t.Errorf("a lease was asked with the budget spent")
			}
		}},
		{name: "unacked-report", code: "REPORT_PENDING", run: func(h *harness) {
			h.apply("v1")
			h.sim.Fail(sim.FailRule{Path: "/v1/agent/report", Status: 503, Message: "report store unavailable"})
			h.release("v2", nil)
			h.wantExit(h.tick(), 75)
		}, next: func(h *harness) {
			h.sim.ClearFails()
			h.wantExit(h.tick(), 0)
			if rec := h.record(); rec.LastReport == nil || !rec.LastReport.Acknowledged {
				h.t.Errorf("the next tick did not deliver the report: %+v", rec.LastReport)
			}
		}},
		{name: "outbox-stuck", code: "OUTBOX_STUCK", run: func(h *harness) {
			h.apply("v1")
			h.sim.Fail(sim.FailRule{Path: "/v1/agent/report", Status: 503, Message: "report store unavailable"})
			h.release("v2", nil)
			h.wantTicks(4, 75)
		}, next: func(h *harness) { h.wantExit(h.tick(), 75) }},
		{name: "repeated-75", code: "CHECKIN_FAILED", run: func(h *harness) {
			h.apply("v1")
			h.sim.Fail(sim.FailRule{Path: "/v1/agent/checkin", Status: 503, Message: "upstream connect error"})
			h.wantTicks(4, 75)
		}, next: func(h *harness) { h.wantExit(h.tick(), 75) }},
		{name: "kv-read-503", code: "BAO_UNAVAILABLE", run: func(h *harness) {
			h.sim.Fail(sim.FailRule{Path: "/v1/monky/data/env-qa-02/see/db", Status: 503, Message: "Vault is sealed"})
			h.release("v1", nil)
			h.wantExit(h.tick(), 75)
		}, next: func(h *harness) {
			h.sim.ClearFails()
			before := h.sim.Counts(env).Leases
			h.wantExit(h.tick(), 0)
			if h.sim.Counts(env).Leases != before {
				h.t.Errorf("the resumed tick leased again")
			}
		}},
		{name: "rollback-allowed-pull-failed", code: "COMPOSE_PULL_FAILED", run: func(h *harness) {
			h.release("v1", func(f map[string][]byte) { f["bundle.json"] = []byte(`{"agent": {"allow_rollback": true}}`) })
			h.wantExit(h.tick(), 0)
			h.apply("v2")
			if _, err := h.sim.SetDesiredRelease(env, "v1"); err != nil {
				h.t.Fatal(err)
			}
			// the old image is gone from the registry
			h.dockerKnob("pull-error", "Error response from daemon: manifest for harbor.example/monky/api:v1 not found: manifest unknown")
			h.wantExit(h.tick(), 1)
			if e, ok := h.entry(func(e store.Entry) bool { return e.Event == "rollback-allowed" }); !ok || !strings.Contains(e.Detail, "allowed by bundle.json agent.allow_rollback") {
				h.t.Errorf("the allowed rollback is not journaled as such: %+v", e)
			}
		}, next: func(h *harness) {
			h.clock.Advance(2 * time.Minute)
			h.wantExit(h.tick(), 1)
		}},
		{name: "token-file-unusable", code: "LOCAL_FAILURE", run: func(h *harness) {
			h.apply("v1")
			tok := h.cfg.TokenPath()
			if err := os.Remove(tok); err != nil {
				h.t.Fatal(err)
			}
			if err := os.Mkdir(tok, 0o700); err != nil {
				h.t.Fatal(err)
			}
			h.wantExit(h.tick(), 1)
		}, next: func(h *harness) { h.noCheckin(1) }},
		{name: "moved-aside", code: "", verdict: explain.Converged, run: func(h *harness) {
			h.apply("v1")
			if err := os.WriteFile(h.cfg.StatePath(), bytes.Repeat([]byte("not a bolt file "), 512), 0o600); err != nil {
				h.t.Fatal(err)
			}
			h.reload() // the next run moves the corrupt file aside and starts afresh
			h.wantExit(h.tick(), 0)
		}, next: func(h *harness) {
			// the fresh file goes on as the box did: a heartbeat, nothing applied again
			before := h.sim.Counts(env).BundleFetches
			h.wantExit(h.tick(), 0)
			if got := h.sim.Counts(env).BundleFetches; got != before {
				h.t.Errorf("the fresh file fetched the bundle again")
			}
		}},
		{name: "lease-refused-by-tenancy", code: "LEASE_RATE_LIMITED", verdict: explain.Working,
			// a token kept under renew_below_s: the next apply needs a lease
			sim: func(o *sim.Options) { o.TokenTTL = 2 * time.Hour; o.TokenMaxTTL = 2 * time.Hour }, run: func(h *harness) {
				h.apply("v1")
				h.sim.Fail(sim.FailRule{Path: "/v1/agent/lease", Status: 429, Message: "0 leases per environment per hour", RetryAfter: "1800"})
				h.release("v2", nil)
				h.wantExit(h.tick(), 0)
			}, next: func(h *harness) {
				// no lease is asked before tenancy's Retry-After
				h.release("v3", nil)
				before := h.sim.Counts(env).Leases
				h.tick()
				if got := h.sim.Counts(env).Leases; got != before {
					h.t.Errorf("a lease was asked before tenancy's Retry-After")
				}
			}},
		{name: "dying-token-budget-spent", code: "BAO_PERMISSION_DENIED", verdict: explain.NeedsPerson,
			codes: []string{"BAO_PERMISSION_DENIED", "TOKEN_EXPIRING", "LEASE_BUDGET", "LEASE_EVERY_TICK"},
			sim:   func(o *sim.Options) { o.TokenTTL = time.Minute },
			run: func(h *harness) {
				h.sim.Fail(sim.FailRule{Path: "/v1/auth/token/renew-self", Status: 403, Message: "permission denied"})
				h.sim.Fail(sim.FailRule{Path: "/v1/agent/lease", Status: 503, Message: "lease backend unavailable"})
				for _, v := range []string{"v1", "v2", "v3", "v4", "v5"} {
					h.freshGrant()
					h.apply(v)
				}
			}, next: func(h *harness) {
				// the same refusal: the token is deleted and made again from the grant on disk
				h.freshGrant()
				before := h.sim.Counts(env).Logins
				h.wantExit(h.tick(), 0)
				if h.sim.Counts(env).Logins == before {
					h.t.Errorf("the next tick did not log in again")
				}
			}},
		{name: "token-symlink", code: "LOCAL_FAILURE", verdict: explain.NeedsPerson, run: func(h *harness) {
			h.apply("v1")
			tok := h.cfg.TokenPath()
			moved := tok + ".real"
			if err := os.Rename(tok, moved); err != nil {
				h.t.Fatal(err)
			}
			if err := os.Symlink(moved, tok); err != nil {
				h.t.Fatal(err)
			}
			h.wantExit(h.tick(), 1)
		}, next: func(h *harness) { h.noCheckin(1) }},
		{name: "openbao-down-40m", code: "BAO_UNAVAILABLE", verdict: explain.NeedsPerson, run: func(h *harness) {
			h.apply("v1")
			h.sim.Fail(sim.FailRule{Path: "/v1/monky/data/env-qa-02/see/db", Status: 503, Message: "Vault is sealed"})
			h.release("v2", nil)
			for i := 0; i < 5; i++ {
				h.wantExit(h.tick(), 75)
				h.clock.Advance(9 * time.Minute)
			}
		}, next: func(h *harness) {
			// once OpenBao answers, the apply goes on by itself, and the box reads converged
			h.sim.ClearFails()
			h.wantExit(h.tick(), 0)
			doc, err := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
			if err != nil || doc.Verdict != explain.Converged {
				h.t.Errorf("after OpenBao came back: verdict %s codes %v (%v)", doc.Verdict, doc.Codes, err)
			}
		}},
		{name: "stale-box", code: "TICKS_STOPPED", verdict: explain.NeedsPerson, sentAfter: 20 * time.Minute, run: func(h *harness) {
			h.apply("v1")
			h.wantTicks(2, 0)
			// then the timer stops: no tick for 20 minutes when the box sends its copy
		}, next: func(h *harness) {
			// once the timer runs a tick again, the box is converged as it was
			h.clock.Advance(20 * time.Minute)
			h.wantExit(h.tick(), 0)
			doc, err := explain.Build(h.st, explain.Options{Now: h.clock.Now()})
			if err != nil || doc.Verdict != explain.Converged {
				h.t.Errorf("after the timer ran again: verdict %s (%v)", doc.Verdict, err)
			}
		}},
		{name: "refused-disk-headroom", code: "DISK_INSUFFICIENT", run: func(h *harness) {
			// the images (3 GiB × 1.5) fit the 5 GiB free; the config's 2 GiB headroom does not
			h.disk.free = 5 << 30
			h.release("v1", func(f map[string][]byte) { f["bundle.json"] = []byte(`{"disk_need_bytes": 3221225472}`) })
			h.wantExit(h.tick(), 1)
		}, next: func(h *harness) {
			// what the fix names clears it: a smaller disk.headroom_bytes in the config
			h.rewriteConfig("state_dir:", "disk:\n  headroom_bytes: 268435456\nstate_dir:")
			h.wantExit(h.tick(), 0)
		}},
		{name: "blocked-with-outbox", code: "AGENT_UNAUTHENTICATED", run: func(h *harness) {
			h.apply("v1")
			h.sim.Fail(sim.FailRule{Path: "/v1/agent/report", Status: 503, Message: "report store unavailable"})
			h.release("v2", nil)
			h.wantExit(h.tick(), 75)
			h.sim.RevokeTokens(env)
			h.wantExit(h.tick(), 1)
			if rec := h.record(); rec.State != "Blocked" {
				h.t.Fatalf("state %s, want Blocked", rec.State)
			}
		}, next: func(h *harness) {
			// a blocked box sends nothing, its outbox included
			before := h.sim.Counts(env).Reports
			h.noCheckin(1)
			if got := h.sim.Counts(env).Reports; got != before {
				h.t.Errorf("a blocked box sent its outbox (%d → %d)", before, got)
			}
		}},
		{name: "token-file-writable", code: "LOCAL_FAILURE", run: func(h *harness) {
			h.apply("v1")
			if err := os.Chmod(h.cfg.TokenPath(), 0o666); err != nil {
				h.t.Fatal(err)
			}
			h.wantExit(h.tick(), 1)
		}, next: func(h *harness) { h.noCheckin(1) }},
		// the desk's cases of the issue "every line true of this box", one copy each
		{name: "refused-ipam", code: "PRIVILEGED_REFUSED", run: func(h *harness) {
			h.apply("v1")
			h.release("v2", func(f map[string][]byte) {
				f["compose.yaml"] = append(f["compose.yaml"], []byte("networks:\n  front:\n    ipam:\n      config:\n        - subnet: 10.99.0.0/24\n")...)
			})
			h.wantExit(h.tick(), 1)
		}, next: (*harness).sameRefusal},
		{name: "stored-token-space", code: "CREDENTIAL_SHAPE", run: func(h *harness) {
			h.apply("v1")
			if err := os.WriteFile(h.cfg.TokenPath(), []byte("s.abc def"), 0o600); err != nil {
				h.t.Fatal(err)
			}
			h.wantExit(h.tick(), 1)
		}, next: func(h *harness) {
			h.noCheckin(1)
			h.freshGrant()
			h.wantExit(h.tick(), 0)
		}},
		{name: "bundle-not-found", code: "BUNDLE_NOT_FOUND", run: func(h *harness) {
			h.apply("v1")
			h.release("v2", nil)
			h.sim.UnpublishRelease(env, "v2")
			h.wantExit(h.tick(), 1)
		}, next: func(h *harness) {
			// the retry asks again by itself; published, the sha applies
			h.release("v2", nil)
			h.clock.Advance(time.Hour)
			h.wantExit(h.tick(), 0)
		}},
		{name: "compose-missing", code: "DOCKER_NOT_FOUND", run: func(h *harness) {
			h.apply("v1")
			h.release("v2", nil)
			h.dockerKnob("compose-version", "error: docker: 'compose' is not a docker command.")
			h.wantExit(h.tick(), 1)
		}, next: func(h *harness) {
			h.dockerKnob("compose-version", "")
			h.wantExit(h.tick(), 0)
		}},
		{name: "recheck-headroom-lowered", code: "", verdict: explain.Converged, run: func(h *harness) {
			h.disk.free = 5 << 30
			h.release("v1", func(f map[string][]byte) { f["bundle.json"] = []byte(`{"disk_need_bytes": 3221225472}`) })
			h.wantExit(h.tick(), 1)
			h.rewriteConfig("state_dir:", "disk:\n  headroom_bytes: 268435456\nstate_dir:")
			h.wantExit(h.tick(), 0)
		}, next: func(h *harness) { h.wantExit(h.tick(), 0) }},
		{name: "lock-file-unusable", code: "LOCAL_FAILURE", run: func(h *harness) {
			h.apply("v1")
			if err := os.Remove(h.cfg.LockPath()); err != nil {
				h.t.Fatal(err)
			}
			if err := os.Mkdir(h.cfg.LockPath(), 0o700); err != nil {
				h.t.Fatal(err)
			}
			h.wantExit(h.tick(), 1)
		}, next: func(h *harness) { h.noCheckin(1) }},
	}
}

// supportWant is what a desk must read on a copy of each case, read without its config: the
// verdict, who must act ("" when nobody: the agent goes on by itself), and the start of the fix
// line with the box's own paths written {state_dir}, {deploy_dir}, {config}, {bootstrap}.
type supportWant struct{ verdict, who, fix string }

var supportWants = map[string]supportWant{
	"refused-privileged":           {explain.NeedsPerson, "publisher", "no command: in monky-deploy, drop each finding"},
	"refused-rollback":             {explain.NeedsPerson, "publisher", "no command: in monky-deploy, set agent.allow_rollback: true"},
	"refused-bundle-invalid":       {explain.NeedsPerson, "publisher", "no command: in monky-deploy, fix the bundle"},
	"refused-sha-mismatch":         {explain.NeedsPerson, "publisher", "find . -type f ! -name .env"},
	"refused-env-incomplete":       {explain.NeedsPerson, "publisher", "no command: in monky-deploy, add the entries"},
	"refused-manifest-path":        {explain.NeedsPerson, "publisher", "no command: in monky-deploy, fix the entry's path in secrets.manifest.json to lie under monky/data/env-qa-02/see/"},
	"refused-disk-full":            {explain.NeedsPerson, "box", `df -h "$(sudo -u monky-deployd docker info -f '{{.DockerRootDir}}')"`},
	"refused-disk-1pib":            {explain.NeedsPerson, "publisher", "no command: in monky-deploy, fix disk_need_bytes"},
	"refused-disk-headroom":        {explain.NeedsPerson, "box", "grep -n -A3 '^disk:' {config}   # disk.headroom_bytes (2147483648)"},
	"failed-pull":                  {explain.NeedsPerson, "box", "sudo ls -l {state_dir}/docker/config.json"},
	"failed-parked":                {explain.NeedsPerson, "box", "sudo -u monky-deployd docker compose -p monky-env-qa-02 logs --tail 50"},
	"resume-then-failed":           {explain.Working, "", "sudo -u monky-deployd docker compose -p monky-env-qa-02 logs --tail 50"},
	"failed-unhealthy-apply":       {explain.Working, "", "sudo -u monky-deployd docker compose -p monky-env-qa-02 ps"},
	"unhealthy-heartbeat":          {explain.NeedsPerson, "box", "sudo -u monky-deployd docker compose -p monky-env-qa-02 ps"},
	"blocked-env-mismatch":         {explain.NeedsPerson, "box", "grep -n '^env_id' {config}   # config says env-qa-03, the token is pinned to env-qa-02"},
	"blocked-unauthenticated":      {explain.NeedsPerson, "box", "sudo ls -l {bootstrap}   # no grant there: re-run the install kit"},
	"blocked-with-outbox":          {explain.NeedsPerson, "box", "sudo ls -l {bootstrap}   # no grant there: re-run the install kit"},
	"token-renew-refused-blocked":  {explain.NeedsPerson, "openbao", "bao read auth/jwt-tenancy/role/see-env"},
	"dying-token":                  {explain.NeedsPerson, "openbao", "bao read auth/jwt-tenancy/role/see-env"},
	"token-expiring":               {explain.NeedsPerson, "openbao", "monky-deployd --config {config} explain -n 10"},
	"lease-every-tick":             {explain.NeedsPerson, "openbao", "bao read auth/jwt-tenancy/role/see-env"},
	"lease-budget-spent":           {explain.Working, "", "monky-deployd --config {config} status"},
	"unacked-report":               {explain.Working, "", "monky-deployd --config {config} status | grep"},
	"outbox-stuck":                 {explain.Working, "", "monky-deployd --config {config} explain -n 5"},
	"repeated-75":                  {explain.Working, "", "systemctl status ziti-edge-tunnel"},
	"kv-read-503":                  {explain.Working, "", "curl -s --cacert {bao_ca} {bao_addr}/v1/sys/health"},
	"rollback-allowed-pull-failed": {explain.NeedsPerson, "publisher", "sudo -u monky-deployd env DOCKER_CONFIG={state_dir}/docker docker compose -f {deploy_dir}/resolved/"},
	"token-file-unusable":          {explain.NeedsPerson, "box", "sudo rm -r -- {state_dir}/bao.token && sudo -u monky-deployd monky-deployd --config {config} run --once"},
	"moved-aside":                  {explain.Converged, "", ""},
	"lease-refused-by-tenancy":     {explain.Working, "", "monky-deployd --config {config} status"},
	"dying-token-budget-spent":     {explain.NeedsPerson, "openbao", "bao read auth/jwt-tenancy/role/see-env"},
	"token-symlink":                {explain.NeedsPerson, "box", "sudo -u monky-deployd rm -- {state_dir}/bao.token && sudo -u monky-deployd monky-deployd --config {config} run --once"},
	"openbao-down-40m":             {explain.NeedsPerson, "openbao", "curl -s --cacert {bao_ca} {bao_addr}/v1/sys/health"},
	"stale-box":                    {explain.NeedsPerson, "box", "sudo systemctl enable --now monky-deployd.timer"},
	"token-file-writable":          {explain.NeedsPerson, "box", "sudo -u monky-deployd chmod go-rwx {state_dir}/bao.token && sudo -u monky-deployd monky-deployd --config {config} run --once"},
	"refused-ipam":                 {explain.NeedsPerson, "publisher", "no command: in monky-deploy, drop each finding"},
	"stored-token-space":           {explain.NeedsPerson, "box", "sudo ls -l {bootstrap}   # no grant there: re-run the install kit"},
	"bundle-not-found":             {explain.NeedsPerson, "publisher", "no command: in monky-deploy, publish the bundle of "},
	"compose-missing":              {explain.NeedsPerson, "box", "sudo apt-get install -y docker-compose-plugin ||"},
	"recheck-headroom-lowered":     {explain.Converged, "", ""},
	"lock-file-unusable":           {explain.NeedsPerson, "box", "sudo rm -r -- {state_dir}/lock && sudo -u monky-deployd monky-deployd --config {config} run --once"},
}

// checkDeskReads checks what a desk reads on doc, a copy of case name read without its config:
// its verdict, who must act, its fix line (with h's paths), and that every fix and next line
// runs as printed.
func checkDeskReads(t *testing.T, h *harness, name string, doc explain.Doc) {
	t.Helper()
	want, ok := supportWants[name]
	if !ok {
		t.Fatalf("no supportWants row for %s: every case says what a desk must read", name)
	}
	if doc.Verdict != want.verdict {
		t.Errorf("verdict %s, want %s", doc.Verdict, want.verdict)
	}
	who, fix := "", ""
	if doc.Why != nil {
		fix = doc.Why.Fix
		if doc.Verdict == explain.NeedsPerson {
			who = doc.Why.Who
		}
	}
	if who != want.who {
		t.Errorf("who must act: %q, want %q", who, want.who)
	}
	wantFix := strings.NewReplacer("{state_dir}", h.cfg.StateDir, "{deploy_dir}", h.cfg.DeployDir, "{config}", h.cfg.Path,
		"{bootstrap}", h.cfg.BootstrapPath, "{bao_ca}", h.cfg.Bao.CAFile, "{bao_addr}", h.cfg.Bao.Addr).Replace(want.fix)
	if !strings.HasPrefix(fix, wantFix) {
		t.Errorf("fix %q\nwant it to begin %q", fix, wantFix)
	}
	testkit.RunsAsPrinted(t, "next", doc.Next, false)
	whys := doc.Also
	if doc.Why != nil {
		whys = append([]explain.Why{*doc.Why}, whys...)
	}
	for _, w := range whys {
		testkit.RunsAsPrinted(t, string(w.Code)+" fix", w.Fix, true)
		testkit.RunsAsPrinted(t, string(w.Code)+" next", w.Next, false)
	}
}

// TestSupportCorpus brings a box into each trouble with real ticks, checks that explain names
// the trouble's code, that the committed copy in testdata/support still reads the same, and
// that the next tick does what explain says it will. -update-support rewrites the copies.
func TestSupportCorpus(t *testing.T) {
	testkit.Heavy(t, "make test-heavy", "the corpus brings a box into each trouble with real ticks")
	for _, c := range supportCases(t) {
		t.Run(c.name, func(t *testing.T) {
			var opts []func(*sim.Options)
			if c.sim != nil {
				opts = append(opts, c.sim)
			}
			h := newHarness(t, opts...)
			c.run(h)
			var sent time.Time
			if c.sentAfter > 0 {
				newest, err := explain.AsOf(h.st)
				if err != nil {
					t.Fatal(err)
				}
				sent = newest.Add(c.sentAfter).UTC()
			}
			doc, err := explain.Build(h.st, explain.Options{Copy: true, Now: h.clock.Now(), AsOf: sent})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case c.code == "" && doc.Why != nil:
				t.Fatalf("why %+v, want none\nnext: %s", doc.Why, doc.Next)
			case c.code != "" && (doc.Why == nil || string(doc.Why.Code) != c.code):
				t.Fatalf("why %+v, want code %s\nnext: %s\nlogs:\n%s", doc.Why, c.code, doc.Next, h.logs.String())
			case c.code != "" && strings.HasPrefix(doc.Next, "converged"):
				t.Errorf("a box in trouble reads next %q", doc.Next)
			}
			if c.verdict != "" && doc.Verdict != c.verdict {
				t.Errorf("verdict %s, want %s (codes %v)", doc.Verdict, c.verdict, doc.Codes)
			}
			if c.codes != nil && strings.Join(doc.Codes, ",") != strings.Join(c.codes, ",") {
				t.Errorf("codes %v, want %v", doc.Codes, c.codes)
			}
			checkDeskReads(t, h, c.name, doc)
			raw, err := os.ReadFile(h.cfg.StatePath())
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(supportDir, c.name+".db")
			if *updateSupport {
				if err := os.MkdirAll(supportDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, raw, 0o644); err != nil {
					t.Fatal(err)
				}
				if !sent.IsZero() {
					if err := os.WriteFile(filepath.Join(supportDir, c.name+".asof"), []byte(sent.Format(time.RFC3339)+"\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				committed := copyOf(t, path)
				got, err := explain.Build(committed, explain.Options{Copy: true, AsOf: sent})
				if err != nil {
					t.Fatal(err)
				}
				if (got.Why == nil) != (doc.Why == nil) || (got.Why != nil && got.Why.Code != doc.Why.Code) || got.State != doc.State || got.Verdict != doc.Verdict {
					t.Errorf("%s no longer matches what the engine produces: state %s verdict %s why %+v; the engine: state %s verdict %s why %+v (go test ./states -run SupportCorpus -update-support)",
						path, got.State, got.Verdict, got.Why, doc.State, doc.Verdict, doc.Why)
				}
			}
			c.next(h)
		})
	}
}

// copyOf opens a read-only store on a temporary copy of a corpus file.
func copyOf(t *testing.T, path string) store.Store {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./states -run SupportCorpus -update-support writes it)", err)
	}
	p := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenBolt(p, store.BoltOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
