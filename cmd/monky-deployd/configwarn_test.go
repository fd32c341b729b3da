package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// Each setting that makes a box always red or silent under the shipped units is a `warning:`
// line naming its line: exit 0, and exit 1 with --strict. The package's example and a config
// like the role writes have none.
func TestCheckConfigWarnsOfAlwaysRedOrSilent(t *testing.T) {
	fakeSystemctl(t, "", errors.New("no systemctl on PATH")) // the shipped unit's paths, whatever this machine runs
	dir := t.TempDir()
	base := "env_id: env-qa-02\nsite: cbs\n"
	metrics := "metrics_path: /var/lib/prometheus/node-exporter/monky_deployd.prom\n"
	cases := []struct {
		name, body, want string
	}{
		{"stale below the timer", base + metrics + "stale_after_s: 60\n", "line 4: stale_after_s 60 is below two ticks (160 s"},
		{"stale below loop interval", base + metrics + "interval_s: 300\nstale_after_s: 400\n", "line 5: stale_after_s 400 is below two ticks (640 s"},
		{"stuck below two ticks", base + metrics + "stuck_after_s: 90\n", "line 4: stuck_after_s 90 is below two ticks"},
		{"state_dir under /tmp", base + metrics + "state_dir: /tmp/monky\n", "line 4: state_dir /tmp/monky is under /tmp: the unit's PrivateTmp=yes"},
		{"deploy_dir under /var/tmp", base + metrics + "deploy_dir: /var/tmp/deploy\n", "line 4: deploy_dir /var/tmp/deploy is under /var/tmp"},
		{"state_dir not writable", base + metrics + "state_dir: /srv/monky\n", "line 4: state_dir /srv/monky is not among the unit's ReadWritePaths="},
		{"no metrics_path", base, "metrics_path is not set: no metrics textfile, so no alert ever sees this box"},
		{"metrics_path not writable", base + "metrics_path: /srv/textfile/monky.prom\n", "line 3: metrics_path /srv/textfile/monky.prom is not among the unit's ReadWritePaths="},
		{"healthy past the tick", base + metrics + "healthy_timeout_s: 600\ntick_timeout_s: 600\n", "line 4: healthy_timeout_s 600 is not below tick_timeout_s 600"},
	}
	for _, c := range cases {
		f := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yaml")
		testkit.WriteFile(t, f, c.body, 0o600)
		o, e, code := runIn("check", "config", f)
		if code != 0 || e != "" || !strings.Contains(o, "warning: config "+f+": "+c.want) || !strings.Contains(o, "config "+f+": ok") {
			t.Errorf("%s: exit %d, want 0 and the warning %q:\n%s%s", c.name, code, c.want, o, e)
		}
		if n := strings.Count(o, "warning:"); n != 1 {
			t.Errorf("%s: %d warnings, want 1:\n%s", c.name, n, o)
		}
		o, _, code = runIn("check", "config", "--strict", f)
		if code != 1 || !strings.Contains(o, c.want) || !strings.Contains(o, "1 warning(s), errors with --strict") || strings.Contains(o, ": ok") {
			t.Errorf("%s --strict: exit %d, want 1:\n%s", c.name, code, o)
		}
	}
	good := filepath.Join(dir, "good.yaml")
	testkit.WriteFile(t, good, base+metrics, 0o600)
	for _, f := range []string{good, "../../config.example.yaml"} {
		if o, _, code := runIn("check", "config", "--strict", f); code != 0 || strings.Contains(o, "warning") {
			t.Errorf("%s: exit %d\n%s", f, code, o)
		}
	}
}

// The warnings' picture of the units is the shipped units': the timer's period and delay, the
// paths the service may write, its private /tmp.
func TestConfigWarningsKnowTheUnits(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "packaging", "systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	timer, service := read("monky-deployd.timer"), read("monky-deployd.service")
	val := func(unit, key string) string {
		m := regexp.MustCompile(`(?m)^` + key + `=(.*)$`).FindStringSubmatch(unit)
		if m == nil {
			t.Fatalf("no %s=", key)
		}
		return m[1]
	}
	if got := val(timer, "OnUnitActiveSec"); got != "60s" || timerEvery != 60 {
		t.Errorf("OnUnitActiveSec=%s, timerEvery %d", got, timerEvery)
	}
	if got := val(timer, "RandomizedDelaySec"); got != "20s" || timerJitter != 20 {
		t.Errorf("RandomizedDelaySec=%s, timerJitter %d", got, timerJitter)
	}
	if val(service, "PrivateTmp") != "yes" {
		t.Errorf("PrivateTmp=%s", val(service, "PrivateTmp"))
	}
	var rw []string
	for _, p := range strings.Fields(val(service, "ReadWritePaths")) {
		if p = strings.TrimPrefix(p, "-"); p != "/run/docker.sock" {
			rw = append(rw, p)
		}
	}
	if !slices.Equal(rw, writablePaths) {
		t.Errorf("ReadWritePaths= %v, writablePaths %v", rw, writablePaths)
	}
}

// fakeSystemctl makes `systemctl show` answer out (err: fail) for the test's length.
func fakeSystemctl(t *testing.T, out string, err error) *[]string {
	t.Helper()
	var got []string
	old := systemctlShow
	systemctlShow = func(args ...string) ([]byte, error) {
		got = append(got, strings.Join(args, " "))
		return []byte(out), err
	}
	t.Cleanup(func() { systemctlShow = old })
	return &got
}

// A deploy_dir outside state_dir is checked against the unit's ReadWritePaths= as systemd has
// them (`systemctl show`, the documented drop-in included): a box whose drop-in names the
// directory, or a parent of it, has no warning, and `check config --strict` passes it; one
// without is warned with the paths systemd has and the drop-in that fixes it. When the unit
// cannot be read the warning names the shipped unit's paths and says why.
func TestCheckConfigReadsTheUnitsReadWritePaths(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "config.yaml")
	testkit.WriteFile(t, f, "env_id: env-qa-02\nsite: cbs\nmetrics_path: /var/lib/prometheus/node-exporter/monky_deployd.prom\n"+
		"deploy_dir: /srv/monky/env-qa-02\n", 0o600)
	shipped := "/var/lib/monky-deployd /etc/monky-deployd -/run/docker.sock -/var/lib/prometheus/node-exporter"
	cases := []struct {
		name, show string
		err        error
		want       string // "" = no warning
	}{
		{"the drop-in names deploy_dir", "LoadState=loaded\nReadWritePaths=" + shipped + " /srv/monky/env-qa-02\n", nil, ""},
		{"the drop-in names a parent", "ReadWritePaths=" + shipped + " -/srv/monky\nLoadState=loaded\n", nil, ""},
		{"no drop-in", "LoadState=loaded\nReadWritePaths=" + shipped + "\n", nil,
			"line 4: deploy_dir /srv/monky/env-qa-02 is not among the unit's ReadWritePaths= (/var/lib/monky-deployd /etc/monky-deployd /run/docker.sock /var/lib/prometheus/node-exporter, as `systemctl show monky-deployd.service` has them, drop-ins included): every tick fails writing it; add it with a drop-in (sudo systemctl edit monky-deployd.service: [Service] ReadWritePaths=/srv/monky/env-qa-02)"},
		{"a sibling is not a parent", "LoadState=loaded\nReadWritePaths=" + shipped + " /srv/monky/env-qa-0\n", nil,
			"deploy_dir /srv/monky/env-qa-02 is not among the unit's ReadWritePaths= ("},
		{"the unit is not installed", "LoadState=not-found\nReadWritePaths=\n", nil,
			"deploy_dir /srv/monky/env-qa-02 is not among the unit's ReadWritePaths= (/var/lib/monky-deployd /etc/monky-deployd /var/lib/prometheus/node-exporter, the shipped unit's: the unit itself could not be read, monky-deployd.service is not known to systemd here (LoadState=not-found)): every tick fails writing it, unless a drop-in adds it"},
		{"no systemd", "", errors.New("exit status 1: System has not been booted with systemd as init system (PID 1). Can't operate."),
			"the shipped unit's: the unit itself could not be read, systemctl show monky-deployd.service: exit status 1: System has not been booted with systemd"},
	}
	for _, c := range cases {
		calls := fakeSystemctl(t, c.show, c.err)
		o, _, code := runIn("check", "config", "--strict", f)
		if got := strings.Join(*calls, "; "); got != "-p LoadState -p ReadWritePaths monky-deployd.service" {
			t.Errorf("%s: systemctl show was called as %q", c.name, got)
		}
		if c.want == "" {
			if code != 0 || strings.Contains(o, "warning") {
				t.Errorf("%s: exit %d, want 0 and no warning:\n%s", c.name, code, o)
			}
			continue
		}
		if code != 1 || !strings.Contains(o, "warning: config "+f+": ") || !strings.Contains(o, c.want) || strings.Count(o, "warning:") != 1 {
			t.Errorf("%s: exit %d, want 1 and one warning with %q:\n%s", c.name, code, c.want, o)
		}
	}
	// metrics_path is read against the same paths: a drop-in for its directory is enough
	m := filepath.Join(dir, "metrics.yaml")
	testkit.WriteFile(t, m, "env_id: env-qa-02\nsite: cbs\nmetrics_path: /srv/textfile/monky.prom\n", 0o600)
	fakeSystemctl(t, "LoadState=loaded\nReadWritePaths="+shipped+" /srv/textfile\n", nil)
	if o, _, code := runIn("check", "config", "--strict", m); code != 0 {
		t.Errorf("metrics_path under a drop-in's path: exit %d\n%s", code, o)
	}
}
