package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// unitKeys parses a unit file into key → values (a key may repeat).
func unitKeys(t *testing.T, name string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testkit.Root(), "packaging", "systemd", name))
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: malformed line %q", name, line)
		}
		keys[k] = append(keys[k], v)
	}
	return keys
}

func TestServiceUnitContract(t *testing.T) {
	t.Parallel()
	k := unitKeys(t, "monky-deployd.service")
	want := map[string]string{
		"Type": "oneshot", "ExecStart": "/usr/bin/monky-deployd run --once", "User": "monky-deployd",
		"SuccessExitStatus": "75", "RestartPreventExitStatus": "78", "UMask": "0077",
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "CapabilityBoundingSet": "", "AmbientCapabilities": "",
		"ReadWritePaths":          "/var/lib/monky-deployd /etc/monky-deployd -/run/docker.sock -/var/lib/prometheus/node-exporter",
		"RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
		"SyslogIdentifier":        "monky-deployd",
		"TimeoutStartSec":         "15min",
		"MemoryMax":               "1G",
	}
	for key, v := range want {
		if got := k[key]; len(got) != 1 || got[0] != v {
			t.Errorf("%s=%q, want %q", key, got, v)
		}
	}
	if env := strings.Join(k["Environment"], " "); !strings.Contains(env, "GOMEMLIMIT=384MiB") {
		t.Errorf("Environment=%q: the agent runs with a GOMEMLIMIT below MemoryMax", env)
	}
	// systemd fails the unit (216/GROUP) when a supplementary group is missing, before the agent
	// runs: neither docker (a box without Docker Engine yet) nor ziti may be required
	if g, ok := k["SupplementaryGroups"]; ok {
		t.Errorf("SupplementaryGroups=%q: the unit must name no group that may not exist (the user's own groups apply)", g)
	}
	if _, ok := k["Restart"]; ok {
		t.Errorf("the tick is a timer-driven oneshot: no Restart=")
	}
}

func TestTimerSpreadsTheFleet(t *testing.T) {
	t.Parallel()
	k := unitKeys(t, "monky-deployd.timer")
	for key, v := range map[string]string{"OnBootSec": "1min", "OnUnitActiveSec": "60s", "RandomizedDelaySec": "20s",
		"FixedRandomDelay": "false", "AccuracySec": "1s", "Persistent": "false", "WantedBy": "timers.target"} {
		if got := k[key]; len(got) != 1 || got[0] != v {
			t.Errorf("%s=%q, want %q", key, got, v)
		}
	}
}

func TestProxyUnitReadsTheIdentityFromItsEnvironmentFile(t *testing.T) {
	t.Parallel()
	k := unitKeys(t, "monky-deployd-proxy.service")
	for key, v := range map[string]string{"User": "ziti", "Restart": "always",
		"EnvironmentFile": "/etc/monky-deployd/proxy.env",
		"ExecStart":       "/usr/bin/ziti tunnel proxy -i ${MONKY_DEPLOYD_IDENTITY} monky.tenancy.deploy:18443 openbao:18200"} {
		if got := k[key]; len(got) != 1 || got[0] != v {
			t.Errorf("%s=%q, want %q", key, got, v)
		}
	}
}

// systemd-analyze verify needs the ExecStart binaries to exist: the units are checked as copies
// whose ExecStart points at stand-ins in a temp dir.
func TestUnitsVerify(t *testing.T) {
	t.Parallel()
	sa := needTool(t, "systemd-analyze", "systemd")
	dir := t.TempDir()
	stand := filepath.Join(dir, "standin")
	testkit.WriteFile(t, stand, "#!/bin/sh\nexit 0\n", 0o755)
	var units []string
	for _, name := range []string{"monky-deployd.service", "monky-deployd.timer", "monky-deployd-proxy.service"} {
		b, err := os.ReadFile(filepath.Join(testkit.Root(), "packaging", "systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.NewReplacer("/usr/bin/monky-deployd ", stand+" ", "/usr/bin/ziti ", stand+" ").Replace(string(b))
		p := filepath.Join(dir, name)
		testkit.WriteFile(t, p, s, 0o644)
		units = append(units, p)
	}
	sb := newSandbox(t)
	code, out := sb.run(nil, []string{"PATH=/usr/bin:/bin", "SYSTEMD_LOG_LEVEL=warning"}, sa, append([]string{"verify"}, units...)...)
	if code != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify: exit %d\n%s", code, out)
	}
}

var exposureRE = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`)

func TestUnitsExposureAtMostThree(t *testing.T) {
	t.Parallel()
	sa := needTool(t, "systemd-analyze", "systemd")
	sb := newSandbox(t)
	for _, name := range []string{"monky-deployd.service", "monky-deployd-proxy.service"} {
		p := filepath.Join(testkit.Root(), "packaging", "systemd", name)
		_, out := sb.run(nil, []string{"PATH=/usr/bin:/bin"}, sa, "security", "--offline=true", "--no-pager", p)
		m := exposureRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s: no exposure level in:\n%s", name, out)
		}
		score, _ := strconv.ParseFloat(m[1], 64)
		t.Logf("%s exposure %.1f", name, score)
		if score > 3.0 {
			t.Errorf("%s exposure %.1f > 3.0", name, score)
		}
	}
}
