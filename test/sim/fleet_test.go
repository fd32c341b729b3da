package sim

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
)

// The simulator keeps each env's last report and its why: the fleet lists the envs with a code,
// grouped by code, each with its verdict, since and next, and the admin API serves the same.
func TestFleetGroupsEachEnvsLastReportByCode(t *testing.T) {
	h := newHarness(t, Options{})
	envs := []string{"env-qa-01", "env-qa-02", "env-qa-03", "env-qa-04", "env-qa-05", "env-qa-06"}
	for _, e := range envs {
		h.sim.AddEnv(e)
	}
	unhealthy := &effects.ReportWhy{Code: "UNHEALTHY", Verdict: "needs_person", Since: "2026-12-01T14:02:00Z", Fault: "f", Evidence: "e", Next: "Checked again\nat every tick.", Fix: "x"}
	post := func(env string, rep effects.Report) {
		t.Helper()
		rep.EnvID = env
		if a := h.tenancyCall("POST", "/v1/agent/report", h.tokenFor(env), rep); a.status != 200 {
			t.Fatalf("report: %d %s", a.status, a.body)
		}
	}
	// env-qa-01 was unhealthy, then recovered: its last report counts
	post("env-qa-01", effects.Report{Result: "failed", Detail: "UNHEALTHY: api", Why: unhealthy})
	post("env-qa-01", effects.Report{Result: "applied", Sha: "a"})
	post("env-qa-02", effects.Report{Result: "failed", Detail: "UNHEALTHY: api", Why: unhealthy})
	post("env-qa-03", effects.Report{Result: "failed", Detail: "PRIVILEGED_REFUSED: api", Why: &effects.ReportWhy{Code: "PRIVILEGED_REFUSED", Verdict: "needs_person", Since: "2026-12-01T14:00:00Z", Next: "n"}})
	post("env-qa-04", effects.Report{Result: "failed", Detail: "UNHEALTHY: worker", Why: unhealthy})
	post("env-qa-05", effects.Report{Result: "failed", Detail: "ROLLBACK_REFUSED: an agent without a why"})
	// env-qa-06 never reported

	rows := h.sim.Fleet(false)
	var got []string
	for _, r := range rows {
		got = append(got, r.Env+" "+r.Verdict+" "+r.Code)
	}
	want := []string{"env-qa-03 needs_person PRIVILEGED_REFUSED", "env-qa-05 failed ROLLBACK_REFUSED", "env-qa-02 needs_person UNHEALTHY", "env-qa-04 needs_person UNHEALTHY"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("fleet rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r := rows[2]; r.Since != unhealthy.Since || r.Next != unhealthy.Next || r.Why == nil || *r.Why != *unhealthy {
		t.Errorf("row %+v does not carry the report's why", r)
	}
	counts := h.sim.FleetCounts()
	if counts["UNHEALTHY"] != 2 || counts["PRIVILEGED_REFUSED"] != 1 || counts["ROLLBACK_REFUSED"] != 1 || counts[VerdictConverged] != 1 || counts[VerdictSilent] != 1 {
		t.Errorf("counts %v", counts)
	}
	if n := len(h.sim.Fleet(true)); n != len(envs) {
		t.Errorf("fleet --all lists %d envs, want %d", n, len(envs))
	}

	var b bytes.Buffer
	WriteFleet(&b, rows)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "ENV") || !strings.Contains(lines[3], "Checked again at every tick.") ||
		lines[5] != "4 env(s): PRIVILEGED_REFUSED 1, ROLLBACK_REFUSED 1, UNHEALTHY 2" {
		t.Errorf("fleet table:\n%s", b.String())
	}

	admin := httptest.NewServer(h.sim.AdminHandler())
	defer admin.Close()
	a := do(t, "GET", admin.URL+"/admin/fleet", nil, nil)
	var served []FleetRow
	if a.status != 200 || json.Unmarshal(a.body, &served) != nil || len(served) != len(rows) || served[2].Code != "UNHEALTHY" || served[2].Why == nil {
		t.Errorf("GET /admin/fleet: %d %s", a.status, a.body)
	}
	if a := do(t, "GET", admin.URL+"/admin/fleet?all=1", nil, nil); a.status != 200 || strings.Count(string(a.body), `"env"`) != len(envs) {
		t.Errorf("GET /admin/fleet?all=1: %d %s", a.status, a.body)
	}
}

// A box that stops speaking is silent past stale_after_s, whatever its last report said, and its
// last words are shown as what it said then, with their age; a box that checks in but does not
// apply what is desired (stuck on OpenBao: no lease, no report) is working, then needs a person
// past stuck_after_s — neither ever reads converged.
func TestFleetNeverCallsASilentOrStuckBoxConverged(t *testing.T) {
	h := newHarness(t, Options{StaleAfter: 5 * time.Minute, StuckAfter: 30 * time.Minute})
	files := map[string][]byte{"compose.yaml": []byte("services: {}\n")}
	for _, e := range []string{"env-qa-01", "env-qa-02", "env-qa-03"} {
		h.sim.AddEnv(e)
	}
	sha1, err := h.sim.AddRelease("env-qa-02", "v1", files)
	if err != nil {
		t.Fatal(err)
	}
	files["compose.yaml"] = []byte("services: {}\n# v2\n")
	sha2, err := h.sim.AddRelease("env-qa-02", "v2", files)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.sim.SetDesired("env-qa-02", sha1); err != nil {
		t.Fatal(err)
	}
	row := func(env string) FleetRow {
		t.Helper()
		for _, r := range h.sim.Fleet(true) {
			if r.Env == env {
				return r
			}
		}
		t.Fatalf("no row for %s", env)
		return FleetRow{}
	}
	post := func(env string, rep effects.Report) {
		t.Helper()
		rep.EnvID = env
		if a := h.tenancyCall("POST", "/v1/agent/report", h.tokenFor(env), rep); a.status != 200 {
			t.Fatalf("report: %d %s", a.status, a.body)
		}
	}
	// env-qa-01: converged, then its timer stops
	h.checkin(h.tokenFor("env-qa-01"), "env-qa-01", "")
	post("env-qa-01", effects.Report{Result: "applied", Sha: "aaaa"})
	// env-qa-02: applies v1, then v2 is desired and it keeps checking in without a report
	h.checkin(h.tokenFor("env-qa-02"), "env-qa-02", "")
	post("env-qa-02", effects.Report{Result: "applied", Sha: sha1})
	// env-qa-03: unhealthy, then silent
	h.checkin(h.tokenFor("env-qa-03"), "env-qa-03", "")
	post("env-qa-03", effects.Report{Result: "failed", Detail: "UNHEALTHY: api", Why: &effects.ReportWhy{
		Code: "UNHEALTHY", Verdict: "needs_person", Since: "2026-12-01T14:02:00Z", Next: "checked again at every tick"}})
	if r := row("env-qa-01"); r.Verdict != VerdictConverged {
		t.Fatalf("a converged box that speaks: %+v", r)
	}
	if err := h.sim.SetDesired("env-qa-02", sha2); err != nil {
		t.Fatal(err)
	}
	for minute := 1; minute <= 40; minute++ {
		h.clock.Advance(time.Minute)
		h.checkin(h.tokenFor("env-qa-02"), "env-qa-02", sha1) // stuck before its lease: no report
		r1, r2 := row("env-qa-01"), row("env-qa-02")
		if r1.Verdict == VerdictConverged && minute > 5 {
			t.Fatalf("minute %d: a box silent for %d minutes reads converged: %+v", minute, minute, r1)
		}
		if r2.Verdict == VerdictConverged {
			t.Fatalf("minute %d: a box stuck before applying v2 reads converged: %+v", minute, r2)
		}
		if want := effects.VerdictWorking; minute > 30 {
			if r2.Verdict != effects.VerdictNeedsPerson {
				t.Fatalf("minute %d: stuck past stuck_after_s: %+v", minute, r2)
			}
		} else if r2.Verdict != want {
			t.Fatalf("minute %d: stuck: %+v", minute, r2)
		}
	}
	r1 := row("env-qa-01")
	if r1.Verdict != VerdictSilent || r1.Said != "converged (said 40m0s ago)" || !strings.Contains(r1.Next, "no check-in for 40m0s (stale after 5m0s)") {
		t.Errorf("the stopped box: %+v", r1)
	}
	r3 := row("env-qa-03")
	if r3.Verdict != VerdictSilent || r3.Code != "UNHEALTHY" || r3.Said != "needs_person UNHEALTHY: checked again at every tick (said 40m0s ago)" {
		t.Errorf("the unhealthy box that fell silent: %+v", r3)
	}
	if r2 := row("env-qa-02"); !strings.Contains(r2.Next, "desired "+sha2[:12]+" for 40m0s, still applied "+sha1[:12]) || !strings.Contains(r2.Next, "past stuck_after_s") {
		t.Errorf("the stuck box: %+v", r2)
	}
	// the default view lists all three: each needs a look
	if n := len(h.sim.Fleet(false)); n != 3 {
		t.Errorf("fleet lists %d envs, want the 3 that need a look", n)
	}
	var b bytes.Buffer
	WriteFleet(&b, h.sim.Fleet(false))
	if !strings.Contains(b.String(), "silent") || strings.Contains(b.String(), "converged  ") {
		t.Errorf("fleet table:\n%s", b.String())
	}
}
