package metrics_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/machine/metrics"
	"github.com/tikali/monky-deployd/store"
)

var t0 = time.Date(2026, 3, 2, 14, 0, 0, 0, time.UTC)

// box writes a refused record at tick n with its journal, as the machine leaves it.
func box(t *testing.T, st store.Store, n uint64, refuse bool) {
	t.Helper()
	err := st.Update(func(tx store.Tx) error {
		rec := store.Record{EnvID: "env-qa-02", State: "Reported", Tick: n, AppliedSha: "5b2e", DesiredSha: "7a10",
			LastCheckinAt: t0, Token: store.TokenMeta{Present: true, Source: "lease", ExpiresAt: t0.Add(24 * time.Hour)},
			Containers: []store.Container{{Name: "a", Service: "api", State: "running", Health: "healthy"},
				{Name: "w", Service: "worker", State: "running"}, {Name: "d", Service: "db", State: "exited"}}}
		if refuse {
			rec.State = "Refused"
			rec.Refusal = &store.Refusal{Sha: "7a10", Code: "DISK_INSUFFICIENT", Detail: "image storage (/var/lib/docker) has 10 MiB free, bundle needs 200 MiB"}
			if _, err := tx.Append(store.Entry{Tick: n, At: t0, From: "BundleVerified", To: "Refused", Event: "refuse", Code: "DISK_INSUFFICIENT"}); err != nil {
				return err
			}
		}
		if err := tx.PutTick(store.TickSummary{Tick: n, StartedAt: t0}); err != nil {
			return err
		}
		if err := tx.AddLease(store.LeaseEvent{At: t0.Add(-10 * time.Minute), Outcome: "asked"}); err != nil {
			return err
		}
		if _, err := tx.Enqueue(store.QueuedReport{Queued: t0, Meta: store.QueuedReportMeta{Result: "failed", Sha: "7a10"}}); err != nil {
			return err
		}
		return tx.PutRecord(rec)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func parse(t *testing.T, path string) map[string]*dto.MetricFamily {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("the textfile does not parse: %v", err)
	}
	return fams
}

// value returns the value of the family's sample whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	fam, ok := fams[name]
	if !ok {
		t.Fatalf("no family %s", name)
	}
	for _, m := range fam.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["env"] != "env-qa-02" {
			t.Errorf("%s lacks env label: %v", name, labels)
		}
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		}
	}
	t.Fatalf("no sample of %s with %v", name, want)
	return 0
}

func TestWriteTextfileParsesWithValues(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "monky_deployd.prom")
	counters := filepath.Join(dir, metrics.CountersFile)
	st := store.NewMemory()

	box(t, st, 1, false)
	if err := metrics.Write(path, counters, st, metrics.Tick{Exit: 0, Duration: 1500 * time.Millisecond, EndedAt: t0}); err != nil {
		t.Fatal(err)
	}
	box(t, st, 2, true)
	tick2 := metrics.Tick{Exit: 1, Code: "DISK_INSUFFICIENT", Duration: 250 * time.Millisecond, EndedAt: t0.Add(time.Minute),
		Interval: time.Minute, Version: "1.4.0", Transports: []string{"proxy", "system"}}
	if err := metrics.Write(path, counters, st, tick2); err != nil {
		t.Fatal(err)
	}
	// the same tick written twice counts once
	if err := metrics.Write(path, counters, st, tick2); err != nil {
		t.Fatal(err)
	}
	fams := parse(t, path)
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"monky_deployd_state", map[string]string{"state": "Refused"}, 1},
		{"monky_deployd_state", map[string]string{"state": "Reported"}, 0},
		{"monky_deployd_sha_info", map[string]string{"kind": "applied", "sha": "5b2e"}, 1},
		{"monky_deployd_sha_info", map[string]string{"kind": "desired", "sha": "7a10"}, 1},
		{"monky_deployd_last_tick_exit_code", nil, 1},
		{"monky_deployd_last_tick_duration_seconds", nil, 0.25},
		{"monky_deployd_last_tick_timestamp_seconds", nil, float64(t0.Add(time.Minute).Unix())},
		{"monky_deployd_last_checkin_timestamp_seconds", nil, float64(t0.Unix())},
		{"monky_deployd_ticks_total", map[string]string{"exit": "0"}, 1},
		{"monky_deployd_ticks_total", map[string]string{"exit": "1"}, 1},
		{"monky_deployd_refusals_total", map[string]string{"code": "DISK_INSUFFICIENT"}, 1},
		{"monky_deployd_lease_budget_used", nil, 2},
		{"monky_deployd_lease_budget_limit", nil, 5},
		{"monky_deployd_token_expiry_timestamp_seconds", nil, float64(t0.Add(24 * time.Hour).Unix())},
		{"monky_deployd_outbox_reports", nil, 2},
		{"monky_deployd_containers_healthy", nil, 2},
		{"monky_deployd_containers", nil, 3},
		{"monky_deployd_build_info", map[string]string{"version": "1.4.0", "transports": "proxy,system"}, 1},
		{"monky_deployd_failures_total", map[string]string{"code": "DISK_INSUFFICIENT"}, 1},
		{"monky_deployd_tick_interval_seconds", nil, 60},
	}
	for _, c := range checks {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if n := len(fams["monky_deployd_state"].Metric); n != len(machine.All) {
		t.Errorf("state is one-hot over %d states, want %d", n, len(machine.All))
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("textfile: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.tmp*"))
	if len(left) != 0 {
		t.Errorf("temp files left behind: %v", left)
	}
}

func TestDamagedCountersStartOver(t *testing.T) {
	dir := t.TempDir()
	counters := filepath.Join(dir, metrics.CountersFile)
	if err := os.WriteFile(counters, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	st := store.NewMemory()
	box(t, st, 7, false)
	path := filepath.Join(dir, "m.prom")
	if err := metrics.Write(path, counters, st, metrics.Tick{Exit: 75, EndedAt: t0}); err != nil {
		t.Fatal(err)
	}
	fams := parse(t, path)
	if got := value(t, fams, "monky_deployd_ticks_total", map[string]string{"exit": "75"}); got != 1 {
		t.Errorf("ticks_total{exit=75} = %v after a damaged counters file, want 1", got)
	}
	if got := value(t, fams, "monky_deployd_failures_total", map[string]string{"code": metrics.NoCode}); got != 1 {
		t.Errorf("failures_total{code=NONE} = %v, want 1", got)
	}
}

// TestNamesPassPromlint: every family the textfile carries passes Prometheus' own linter
// (no gauge named like a counter, units in base units, help on every metric).
func TestNamesPassPromlint(t *testing.T) {
	rec := store.Record{EnvID: "env-qa-02", State: "Refused", AppliedSha: "5b2e", DesiredSha: "7a10",
		Containers: []store.Container{{Name: "a", Service: "api", State: "running"}}}
	c := metrics.Counters{TicksByExit: map[string]float64{"0": 3, "1": 1}, FailuresByCode: map[string]float64{"PRIVILEGED_REFUSED": 1},
		RefusalsByCode: map[string]float64{"PRIVILEGED_REFUSED": 1}}
	fams := metrics.Families(rec, c, metrics.Tick{Exit: 1, Code: "PRIVILEGED_REFUSED", EndedAt: t0, Interval: time.Minute,
		Version: "1.4.0", Transports: []string{"proxy", "system"}}, 1, 0)
	problems, err := promlint.NewWithMetricFamilies(fams).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
	}
	for _, want := range []string{"monky_deployd_build_info", "monky_deployd_failures_total", "monky_deployd_last_tick_duration_seconds",
		"monky_deployd_lease_budget_used", "monky_deployd_outbox_reports", "monky_deployd_state", "monky_deployd_containers"} {
		if !names[want] {
			t.Errorf("no family %s", want)
		}
	}
	if names["monky_deployd_containers_total"] {
		t.Error("monky_deployd_containers_total is a gauge named like a counter")
	}
}

// refusedBox is the textfile of a box whose seventh tick refused a bundle, parsed.
func refusedBox(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	dir := t.TempDir()
	st := store.NewMemory()
	box(t, st, 7, true)
	path := filepath.Join(dir, "m.prom")
	if err := metrics.Write(path, filepath.Join(dir, metrics.CountersFile), st, metrics.Tick{Exit: 1, EndedAt: t0}); err != nil {
		t.Fatal(err)
	}
	return parse(t, path)
}

// TestConvergedAndWhyComeFromExplain: the metrics say what explain says — a refused box is not
// converged and its why names the refusal's code.
func TestConvergedAndWhyComeFromExplain(t *testing.T) {
	fams := refusedBox(t)
	if v := value(t, fams, "monky_deployd_converged", nil); v != 0 {
		t.Errorf("a refused box: converged %v", v)
	}
	if v := value(t, fams, "monky_deployd_why", map[string]string{"code": "DISK_INSUFFICIENT"}); v != 1 {
		t.Errorf("why DISK_INSUFFICIENT = %v", v)
	}
}

// TestNeedsPersonAndEveryCode: the metrics carry the one verdict — needs_person for a refused
// box, a why sample for each active code (the refusal and the outbox beside it), none for a
// code that is not active; a box working on it (a young outage) does not need a person.
func TestNeedsPersonAndEveryCode(t *testing.T) {
	fams := refusedBox(t)
	if v := value(t, fams, "monky_deployd_needs_person", nil); v != 1 {
		t.Errorf("a refused box: needs_person %v", v)
	}
	codes := map[string]bool{}
	for _, m := range fams["monky_deployd_why"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "code" {
				codes[l.GetValue()] = true
			}
		}
	}
	if len(codes) != 2 || !codes["DISK_INSUFFICIENT"] || !codes["REPORT_PENDING"] {
		t.Errorf("why codes %v, want DISK_INSUFFICIENT and REPORT_PENDING", codes)
	}
	if v := value(t, fams, "monky_deployd_stale_after_seconds", nil); v != 300 {
		t.Errorf("stale_after_seconds %v", v)
	}

	// the same box, its check-in unanswered for ten minutes: working on it, and the alert rules
	// know tenancy did not answer
	dir := t.TempDir()
	path := filepath.Join(dir, "m.prom")
	st := store.NewMemory()
	box(t, st, 8, false)
	exit := 75
	if err := st.Update(func(tx store.Tx) error {
		q, err := tx.Outbox()
		if err != nil {
			return err
		}
		for _, r := range q {
			if err := tx.Ack(r.ID); err != nil {
				return err
			}
		}
		if err := tx.PutTick(store.TickSummary{Tick: 8, StartedAt: t0.Add(-10 * time.Minute), LastAt: t0, Folded: 10, Exit: &exit}); err != nil {
			return err
		}
		_, err = tx.Append(store.Entry{Tick: 8, At: t0, From: "Idle", To: "Idle", Event: "checkin-failed", Code: "CONNECTION_REFUSED", Detail: "nothing listens"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := metrics.Write(path, filepath.Join(dir, metrics.CountersFile), st, metrics.Tick{Exit: 75, EndedAt: t0, Limits: explain.Limits{StaleAfter: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	fams = parse(t, path)
	if v := value(t, fams, "monky_deployd_needs_person", nil); v != 0 {
		t.Errorf("ten minutes of a refused connection: needs_person %v", v)
	}
	if v := value(t, fams, "monky_deployd_checkin_unanswered", nil); v != 1 {
		t.Errorf("checkin_unanswered %v", v)
	}
	if v := value(t, fams, "monky_deployd_why", map[string]string{"code": "CONNECTION_REFUSED"}); v != 1 {
		t.Errorf("why CONNECTION_REFUSED %v", v)
	}
	if v := value(t, fams, "monky_deployd_stale_after_seconds", nil); v != 3600 {
		t.Errorf("stale_after_seconds %v, want the config's", v)
	}
}

// TestAnUntrustedTokenIsNoTokenOnEverySurface: the newest tick refused bao.token (a symlink)
// and the record says so; the token the record knew before, ten minutes from its expiry, is
// read by no tick. No surface speaks of it as a token the box holds: status says it is not
// usable, explain finds no TOKEN_EXPIRING ("the agent renews it at every tick"), and the
// textfile's token expiry is 0 (no token), like status.
func TestAnUntrustedTokenIsNoTokenOnEverySurface(t *testing.T) {
	st := store.NewMemory()
	const untrusted = "/var/lib/monky-deployd/bao.token is a symlink"
	exit := 1
	err := st.Update(func(tx store.Tx) error {
		rec := store.Record{EnvID: "env-qa-02", State: "Failed", Tick: 9, AppliedSha: "5b2e", DesiredSha: "5b2e", LastCheckinAt: t0.Add(-time.Minute),
			LastTickAt: t0, Token: store.TokenMeta{Present: true, Source: "lease", ExpiresAt: t0.Add(10 * time.Minute), CheckedAt: t0.Add(-time.Hour), Untrusted: untrusted},
			Failure: &store.Failure{Sha: "5b2e", Code: "LOCAL_FAILURE", Detail: "LOCAL_FAILURE: " + untrusted + ": not trusted", State: "Idle", At: t0}}
		if _, err := tx.Append(store.Entry{Tick: 9, At: t0, From: "Idle", To: "Idle", Event: machine.NoteTickEnd, Code: "LOCAL_FAILURE", Detail: rec.Failure.Detail}); err != nil {
			return err
		}
		if err := tx.PutTick(store.TickSummary{Tick: 9, StartedAt: t0, EndedAt: t0, Exit: &exit}); err != nil {
			return err
		}
		return tx.PutRecord(rec)
	})
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Second)
	s, err := explain.BuildStatus(st, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Token.Present || s.Token.ExpiresAt != nil || s.Token.Untrusted != untrusted {
		t.Errorf("status token %+v", s.Token)
	}
	doc, err := explain.Build(st, explain.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range doc.Codes {
		if c == "TOKEN_EXPIRING" || c == "TOKEN_EXPIRED" {
			t.Errorf("explain finds %s of a token no tick reads (codes %v)", c, doc.Codes)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "m.prom")
	if err := metrics.Write(path, filepath.Join(dir, metrics.CountersFile), st, metrics.Tick{Exit: 1, EndedAt: t0}); err != nil {
		t.Fatal(err)
	}
	fams := parse(t, path)
	if v := value(t, fams, "monky_deployd_token_expiry_timestamp_seconds", nil); v != 0 {
		t.Errorf("token_expiry_timestamp_seconds %v of a token no tick reads, want 0 (no token)", v)
	}
	for _, m := range fams["monky_deployd_why"].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == "code" && (l.GetValue() == "TOKEN_EXPIRING" || l.GetValue() == "TOKEN_EXPIRED") {
				t.Errorf("the textfile's why names %s", l.GetValue())
			}
		}
	}
}
