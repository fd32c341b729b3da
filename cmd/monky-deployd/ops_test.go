package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/store"
)

func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "complete -o bashdefault -o default -F _monky_deployd monky-deployd",
		"zsh":  "#compdef monky-deployd",
		"fish": "complete -c monky-deployd",
	} {
		var out, errb bytes.Buffer
		if code := run([]string{"monky-deployd", "completion", shell}, &out, &errb); code != 0 {
			t.Fatalf("completion %s: exit %d: %s", shell, code, errb.String())
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("completion %s lacks %q:\n%s", shell, want, out.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"monky-deployd", "completion", "tcsh"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "bash, zsh or fish") {
		t.Errorf("completion tcsh: exit %d, stderr %q", code, errb.String())
	}
}

// TestHelpHasExamples: every visible command's --help shows at least one example.
func TestHelpHasExamples(t *testing.T) {
	app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	for _, c := range app.Commands {
		if c.Hidden {
			continue
		}
		var out, errb bytes.Buffer
		if code := run([]string{"monky-deployd", c.Name, "--help"}, &out, &errb); code != 0 {
			t.Fatalf("%s --help: exit %d", c.Name, code)
		}
		if !strings.Contains(out.String(), "Examples:") || !strings.Contains(out.String(), "monky-deployd "+c.Name) {
			t.Errorf("%s --help has no example:\n%s", c.Name, out.String())
		}
	}
}

// TestRunWritesMetricsAndExplainExports runs real ticks against the simulator with
// metrics_path set, then reads the textfile with the Prometheus parser and the journal with
// explain --ndjson.
func TestRunWritesMetricsAndExplainExports(t *testing.T) {
	b := startBox(t)
	prom := b.metricsFile()
	b.Desire("v1")
	b.tick(0)
	b.tick(0)

	raw, err := os.ReadFile(prom)
	if err != nil {
		t.Fatalf("no textfile after two ticks: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("textfile does not parse: %v\n%s", err, raw)
	}
	get := func(name, label, value string) float64 {
		t.Helper()
		fam := fams[name]
		if fam == nil {
			t.Fatalf("no %s in\n%s", name, raw)
		}
		for _, m := range fam.Metric {
			ok := label == ""
			for _, l := range m.Label {
				if l.GetName() == label && l.GetValue() == value {
					ok = true
				}
			}
			if ok {
				if m.Counter != nil {
					return m.Counter.GetValue()
				}
				return m.Gauge.GetValue()
			}
		}
		t.Fatalf("no %s{%s=%q}", name, label, value)
		return 0
	}
	if v := get("monky_deployd_state", "state", "Reported"); v != 1 {
		t.Errorf("state Reported = %v", v)
	}
	if v := get("monky_deployd_ticks_total", "exit", "0"); v != 2 {
		t.Errorf("ticks_total{exit=0} = %v, want 2", v)
	}
	if v := get("monky_deployd_containers_healthy", "", ""); v != 2 {
		t.Errorf("containers_healthy = %v, want 2", v)
	}
	if v := get("monky_deployd_token_expiry_timestamp_seconds", "", ""); v <= 0 {
		t.Errorf("token expiry = %v", v)
	}

	o, e, c := b.agent("explain", "--ndjson")
	if c != 0 {
		t.Fatalf("explain --ndjson: exit %d: %s", c, e)
	}
	types := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(o))
	for sc.Scan() {
		var l struct{ Type string }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not JSON: %q", sc.Text())
		}
		types[l.Type]++
	}
	if types["header"] != 1 || types["record"] != 1 || types["tick"] < 2 || types["entry"] < 10 {
		t.Errorf("ndjson line types %v", types)
	}
}

func TestResumeChecks(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{Path: "/etc/monky-deployd/config.yaml", EnvID: "env-qa-02", Transport: "proxy",
		Identity: filepath.Join(dir, "absent.json"), BootstrapPath: filepath.Join(dir, "bootstrap.jwt")}
	rec := store.Record{EnvID: "env-qa-02", Refusal: &store.Refusal{Code: "DISK_INSUFFICIENT"},
		Block: &store.Block{Code: "AGENT_UNAUTHENTICATED"}}
	got := strings.Join(resumeChecks(cfg, rec), "\n")
	for _, want := range []string{"config /etc/monky-deployd/config.yaml read again: env env-qa-02, transport proxy",
		"identity NOT usable", "IDENTITY_UNUSABLE", "the next tick measures it", "no bootstrap grant at"} {
		if !strings.Contains(got, want) {
			t.Errorf("resume checks lack %q:\n%s", want, got)
		}
	}
	if err := os.WriteFile(cfg.BootstrapPath, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Transport = "system"
	got = strings.Join(resumeChecks(cfg, store.Record{EnvID: "env-other", Block: rec.Block}), "\n")
	if strings.Contains(got, "identity") || !strings.Contains(got, "bootstrap grant present") || !strings.Contains(got, "the state file is for env env-other") {
		t.Errorf("resume checks (system transport, grant present, other env):\n%s", got)
	}
}
