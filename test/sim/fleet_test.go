package sim

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

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
