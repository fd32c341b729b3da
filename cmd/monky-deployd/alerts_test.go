package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tikali/monky-deployd/internal/metrics"
	"github.com/tikali/monky-deployd/store"
)

const rulesFile = "../../packaging/prometheus/monky-deployd.rules.yml"

// alertRules parses the shipped rules with Prometheus' own rule-file and PromQL parsers (the
// same checks `promtool check rules` runs, templates included).
func alertRules(t *testing.T) ([]rulefmt.Rule, map[string]parser.Expr) {
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
	exprs := map[string]parser.Expr{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			e, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			rules = append(rules, r)
			exprs[r.Alert] = e
		}
	}
	return rules, exprs
}

// scrape is what Prometheus holds after scraping node_exporter on a box whose textfile
// directory holds file (nil: no monky-deployd file): its samples with instance and job, the
// collector's own node_textfile_mtime_seconds and node_textfile_scrape_error.
type scrape struct {
	file []byte
	at   time.Time // when the file was written (its mtime)
}

func (s scrape) samples(t *testing.T) []promSample {
	t.Helper()
	target := map[string]string{"instance": "box-1:9100", "job": "node"}
	with := func(name string, extra map[string]string) map[string]string {
		l := map[string]string{"__name__": name}
		for k, v := range target {
			l[k] = v
		}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	out := []promSample{{labels: with("node_textfile_scrape_error", nil), v: 0}}
	if s.file == nil {
		return out
	}
	out = append(out, promSample{labels: with("node_textfile_mtime_seconds",
		map[string]string{"file": "/var/lib/prometheus/node-exporter/monky_deployd.prom"}), v: float64(s.at.Unix())})
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(bytes.NewReader(s.file))
	if err != nil {
		t.Fatalf("the textfile does not parse: %v", err)
	}
	for name, f := range fams {
		for _, m := range f.Metric {
			l := map[string]string{}
			for _, lp := range m.Label {
				l[lp.GetName()] = lp.GetValue()
			}
			v := m.GetGauge().GetValue()
			if m.Counter != nil {
				v = m.GetCounter().GetValue()
			}
			out = append(out, promSample{labels: with(name, l), v: v})
		}
	}
	return out
}

// TestAlertRules drives real boxes into each condition an alert is for (the agent against the
// simulator, with metrics_path set; a parked flight and a spent lease budget, which take
// hours of backoff or a tenancy that grants five leases, are written through the state file
// and the metrics writer the agent uses), then evaluates every rule against node_exporter's
// view of each file: exactly the alerts meant for a condition fire, none on a converged box.
// `for:` is Prometheus' to wait out; the test checks the conditions, and the durations below.
func TestAlertRules(t *testing.T) {
	rules, exprs := alertRules(t)
	wantFor := map[string]time.Duration{"MonkyDeploydUnhealthy": 10 * time.Minute, "MonkyDeploydOutboxStuck": 15 * time.Minute}
	for _, r := range rules {
		if d, ok := wantFor[r.Alert]; ok && time.Duration(r.For) != d {
			t.Errorf("%s: for %s, want %s", r.Alert, time.Duration(r.For), d)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" || r.Labels["severity"] == "" {
			t.Errorf("%s: needs a severity, a summary and a description", r.Alert)
		}
	}

	b := startBox(t, "--releases", releasesWithPrivileged(t))
	prom := b.metricsFile()
	files := map[string]scrape{}
	keep := func(cond string) {
		t.Helper()
		raw, err := os.ReadFile(prom)
		if err != nil {
			t.Fatalf("%s: no metrics file: %v", cond, err)
		}
		files[cond] = scrape{file: raw, at: time.Now()}
	}

	b.Sim("desire", "--release", "v1")
	b.tick(0)
	b.tick(0)
	keep("converged")
	b.DockerKnob("unhealthy", "api\n")
	b.tick(1)
	keep("unhealthy")
	b.DockerKnob("unhealthy", "")
	b.fail(`{"path": "/v1/agent/report", "status": 503}`)
	b.tick(75)
	keep("outbox not draining")
	b.clearFails()
	b.tick(0)
	b.Sim("desire", "--release", "v3")
	b.tick(1)
	keep("refused")
	b.Sim("desire", "--release", "v2")
	b.tick(0)
	b.fail(`{"path": "/v1/agent/checkin", "status": 403, "code": "AGENT_ENV_MISMATCH", "message": "token is for env-demo-02"}`)
	b.tick(78)
	keep("env mismatch")
	b.clearFails()
	if _, e, c := b.agent("resume"); c != 0 {
		t.Fatalf("resume: exit %d: %s", c, e)
	}
	b.tick(0)
	b.Sim("reveal", "--kit", filepath.Join(b.Dir, "other-kit"))
	b.tick(1)
	keep("blocked")

	now := time.Now()
	files["parked"] = stateFileScrape(t, store.Record{State: "Failed", Action: "apply", Sha: sha1, Parked: true,
		Attempts: map[string]int{"Up": 5}, Failure: &store.Failure{Sha: sha1, Code: "COMPOSE_UP_FAILED", Detail: "compose up: exit 1"}}, 0, now)
	files["lease budget spent"] = stateFileScrape(t, store.Record{State: "Failed", Action: "apply", Sha: sha1,
		Attempts: map[string]int{"BundleVerified": 1}}, 5, now)

	type condition struct {
		s    scrape
		at   time.Time
		want []string
	}
	conv := files["converged"]
	conds := map[string]condition{
		"converged":           {conv, conv.at, nil},
		"no metrics file":     {scrape{}, now, []string{"MonkyDeploydMetricsMissing"}},
		"three ticks missed":  {conv, conv.at.Add(4 * time.Minute), []string{"MonkyDeploydMetricsStale"}},
		"no check-in 20 min":  {conv, conv.at.Add(20 * time.Minute), []string{"MonkyDeploydMetricsStale", "MonkyDeploydCheckinsStopped"}},
		"token expiring":      {conv, tokenExpiry(t, conv).Add(-time.Hour), []string{"MonkyDeploydMetricsStale", "MonkyDeploydCheckinsStopped", "MonkyDeploydTokenExpiring"}},
		"unhealthy":           {files["unhealthy"], files["unhealthy"].at, []string{"MonkyDeploydUnhealthy"}},
		"outbox not draining": {files["outbox not draining"], files["outbox not draining"].at, []string{"MonkyDeploydOutboxStuck"}},
		"refused":             {files["refused"], files["refused"].at, []string{"MonkyDeploydParked"}},
		"env mismatch":        {files["env mismatch"], files["env mismatch"].at, []string{"MonkyDeploydBlocked", "MonkyDeploydEnvMismatch"}},
		"blocked":             {files["blocked"], files["blocked"].at, []string{"MonkyDeploydBlocked"}},
		"parked":              {files["parked"], now, []string{"MonkyDeploydParked"}},
		"lease budget spent":  {files["lease budget spent"], now, []string{"MonkyDeploydLeaseBudgetExhausted"}},
	}
	fired := map[string]bool{}
	for name, c := range conds {
		db := c.s.samples(t)
		var got []string
		for alert, e := range exprs {
			v, err := evalPromQL(e, db, float64(c.at.UnixNano())/1e9)
			if err != nil {
				t.Fatalf("%s: %v", alert, err)
			}
			if v.scalar != nil {
				t.Fatalf("%s: a scalar is no alert", alert)
			}
			if len(v.vec) > 0 {
				got = append(got, alert)
				fired[alert] = true
			}
		}
		sort.Strings(got)
		want := append([]string(nil), c.want...)
		sort.Strings(want)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: alerts %v, want %v", name, got, want)
		}
	}
	for alert := range exprs {
		if !fired[alert] {
			t.Errorf("%s fired under no condition", alert)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("the metrics file of a blocked box:\n%s", files["blocked"].file)
	}
}

func tokenExpiry(t *testing.T, s scrape) time.Time {
	t.Helper()
	for _, x := range s.samples(t) {
		if x.labels["__name__"] == "monky_deployd_token_expiry_timestamp_seconds" && x.v > 0 {
			return time.Unix(int64(x.v), 0)
		}
	}
	t.Fatal("no token expiry in the converged file")
	return time.Time{}
}

// stateFileScrape writes rec and leases leases of the last hour into a state file and the
// metrics file from it, with the agent's writer.
func stateFileScrape(t *testing.T, rec store.Record, leases int, now time.Time) scrape {
	t.Helper()
	dir := t.TempDir()
	st, err := store.OpenBolt(filepath.Join(dir, "state.db"), store.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec.EnvID, rec.Tick, rec.LastTickAt, rec.LastCheckinAt = demoEnv, 9, now, now
	err = st.Update(func(tx store.Tx) error {
		for i := 0; i < leases; i++ {
			if err := tx.AddLease(store.LeaseEvent{At: now.Add(-time.Duration(i+1) * 5 * time.Minute), Outcome: "asked"}); err != nil {
				return err
			}
		}
		return tx.PutRecord(rec)
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "monky_deployd.prom")
	if err := metrics.Write(path, filepath.Join(dir, metrics.CountersFile), st, metrics.Tick{Exit: 1, Code: "X", EndedAt: now, Interval: time.Minute,
		Version: wantVersion, Transports: []string{"proxy", "system"}}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return scrape{file: raw, at: now}
}
