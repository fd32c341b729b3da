package main

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"

	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/metrics"
	"github.com/tikali/monky-deployd/store"
)

const (
	rulesFile     = "../../packaging/prometheus/monky-deployd.rules.yml"
	rulesTestFile = "../../packaging/prometheus/monky-deployd.rules.test.yml"
)

// alertRules parses the shipped rules with Prometheus' own rule-file and PromQL parsers (the
// same checks `promtool check rules` runs, templates included).
func alertRules(t *testing.T) []rulefmt.Rule {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("rules: %v", err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	var rules []rulefmt.Rule
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if _, err := p.ParseExpr(r.Expr); err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			rules = append(rules, r)
		}
	}
	return rules
}

// TestAlertRulesShape: every rule parses and has a severity, a summary and a description.
func TestAlertRulesShape(t *testing.T) {
	for _, r := range alertRules(t) {
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" || r.Labels["severity"] == "" {
			t.Errorf("%s: needs a severity, a summary and a description", r.Alert)
		}
	}
}

// TestAlertRulesWithPromtool runs the rules' unit tests with Prometheus' own promtool: each rule
// fires for its reason (a refused box, OpenBao down 40 minutes, a stopped timer, tenancy not
// answering, no metrics file) and stays silent on a box that looks alike. .ci/run runs it too,
// with promtool installed (Debian's prometheus package).
func TestAlertRulesWithPromtool(t *testing.T) {
	promtool := testkit.Tool(t, "promtool", "prometheus", "the alert rules' tests run by promtool")
	if promtool == "" {
		t.SkipNow()
	}
	cmd := exec.Command(promtool, "test", "rules", filepath.Base(rulesTestFile))
	cmd.Dir = filepath.Dir(rulesTestFile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestAlertTestsUseTheAgentsMetrics: every series the rules' tests feed promtool is one the
// agent writes (or node_exporter's own), and every rule has a test that fires it and one that
// does not — so the tests cannot drift from what a box serves.
func TestAlertTestsUseTheAgentsMetrics(t *testing.T) {
	raw, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests []struct {
			InputSeries []struct {
				Series string `yaml:"series"`
			} `yaml:"input_series"`
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	written := agentMetricNames(t)
	name := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range doc.Tests {
		for _, s := range tc.InputSeries {
			n := name.FindString(s.Series)
			if n != "node_textfile_scrape_error" && n != "node_textfile_mtime_seconds" && !written[n] {
				t.Errorf("the rules' tests feed %s, which the agent does not write", n)
			}
		}
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, r := range alertRules(t) {
		if !fires[r.Alert] || !silent[r.Alert] {
			t.Errorf("%s: a test where it fires %v, one where it does not %v", r.Alert, fires[r.Alert], silent[r.Alert])
		}
	}
}

// agentMetricNames are the families the agent's metrics writer writes for a refused box with
// its outbox and a box whose check-in went unanswered (between them every family).
func agentMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, refused := range []bool{true, false} {
		dir := t.TempDir()
		st, err := store.OpenBolt(filepath.Join(dir, "state.db"), store.BoltOptions{})
		if err != nil {
			t.Fatal(err)
		}
		exit := 1
		err = st.Update(func(tx store.Tx) error {
			rec := store.Record{EnvID: "env-qa-02", State: string(machine.Reported), Tick: 3, LastTickAt: now, LastCheckinAt: now}
			entry := store.Entry{Tick: 3, At: now, From: "Idle", To: "Idle", Event: machine.NoteCheckinFailed, Code: "CONNECTION_REFUSED"}
			if refused {
				rec.State, rec.Refusal = string(machine.Refused), &store.Refusal{Code: "PRIVILEGED_REFUSED", At: now}
				entry = store.Entry{Tick: 3, At: now, From: "CheckedIn", To: "Refused", Event: "refuse", Code: "PRIVILEGED_REFUSED"}
			}
			if _, err := tx.Append(entry); err != nil {
				return err
			}
			if err := tx.PutTick(store.TickSummary{Tick: 3, StartedAt: now, EndedAt: now, Exit: &exit}); err != nil {
				return err
			}
			return tx.PutRecord(rec)
		})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "monky_deployd.prom")
		if err := metrics.Write(path, filepath.Join(dir, metrics.CountersFile), st, metrics.Tick{Exit: 1, Code: "X", EndedAt: now, Interval: time.Minute}); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(string(raw), -1) {
			names[m[1]] = true
		}
	}
	// and what a tick that stopped before it began writes
	prom := filepath.Join(t.TempDir(), "monky_deployd.prom")
	if err := metrics.WriteStartFailed(prom, "env-qa-02", metrics.CauseConfig, 5*time.Minute, now); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(prom)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(string(raw), -1) {
		names[m[1]] = true
	}
	var all []string
	for n := range names {
		all = append(all, n)
	}
	sort.Strings(all)
	for _, want := range []string{"monky_deployd_needs_person", "monky_deployd_why", "monky_deployd_checkin_unanswered", "monky_deployd_stale_after_seconds"} {
		if !names[want] {
			t.Fatalf("the agent writes no %s: %v", want, all)
		}
	}
	return names
}
