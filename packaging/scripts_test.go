package packaging

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
)

const (
	reload       = "systemctl daemon-reload"
	tryRestart   = "systemctl try-restart monky-deployd-proxy.service"
	usermodDock  = "usermod -a -G docker monky-deployd"
	usermodZiti  = "usermod -a -G ziti monky-deployd"
	mkState      = "install -d -m 0700 -o monky-deployd -g monky-deployd <ROOT>/var/lib/monky-deployd"
	mkEtc        = "install -d -m 0750 -o root -g monky-deployd <ROOT>/etc/monky-deployd"
	mkMetrics    = "install -d -m 0775 -o root -g monky-deployd <ROOT>/var/lib/prometheus/node-exporter"
	disableTimer = "systemctl disable --now monky-deployd.timer"
	isEnabled    = "systemctl is-enabled --quiet monky-deployd.timer"
	composeVer   = "docker compose version"
	stopService  = "systemctl stop monky-deployd.service"
	disableProxy = "systemctl disable --now monky-deployd-proxy.service"
)

// scriptCase is one dpkg or rpm invocation of a maintainer script and the exact calls it must make,
// on the first run and on a second identical run (every script is idempotent).
type scriptCase struct {
	script  string
	args    []string
	systemd bool     // /run/systemd/system exists
	known   []string // getent answers before the first run
	first   []string
	second  []string // nil: same as first
}

func runScriptCases(t *testing.T, cases []scriptCase) {
	for _, c := range cases {
		name := c.script + "(" + strings.Join(c.args, ",") + ")"
		if !c.systemd {
			name += "/no-systemd"
		}
		if len(c.known) > 0 {
			name += "/" + strings.Join(c.known, ",")
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			s.known(c.known...)
			runDir := filepath.Join(s.dir, "run-systemd-system")
			if c.systemd {
				if err := os.MkdirAll(runDir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			env := []string{"MONKY_ROOT=" + s.Root, "MONKY_SYSTEMD_RUN_DIR=" + runDir}
			script := filepath.Join(testkit.Root(), "packaging", "scripts", c.script+".sh")
			for i, want := range [][]string{c.first, c.second} {
				if i == 1 && want == nil {
					want = c.first
				}
				code, out := s.run(nil, env, "sh", append([]string{script}, c.args...)...)
				if code != 0 {
					t.Fatalf("run %d: exit %d: %s", i+1, code, out)
				}
				equalCalls(t, "run "+string(rune('1'+i)), s.calls(), want)
			}
		})
	}
}

func TestPreinstCreatesTheSystemUserOnce(t *testing.T) {
	t.Parallel()
	create := []string{
		"getent group monky-deployd",
		"groupadd --system monky-deployd",
		"getent passwd monky-deployd",
		"useradd --system --gid monky-deployd --home-dir /var/lib/monky-deployd --no-create-home --shell /usr/sbin/nologin --comment Monky backend pull agent monky-deployd",
	}
	exists := []string{"getent group monky-deployd", "getent passwd monky-deployd"}
	var cases []scriptCase
	for _, args := range [][]string{{"install"}, {"install", "0.9.0"}, {"upgrade", "0.9.0"}, {"1"}, {"2"}} {
		cases = append(cases, scriptCase{script: "preinstall", args: args, systemd: true, first: create, second: exists})
	}
	cases = append(cases,
		scriptCase{script: "preinstall", args: []string{"upgrade", "0.9.0"}, systemd: true,
			known: []string{"group:monky-deployd", "passwd:monky-deployd"}, first: exists},
		scriptCase{script: "preinstall", args: []string{"abort-upgrade", "1.0.1"}, systemd: true, first: []string{}},
	)
	runScriptCases(t, cases)
}

func TestPostinstNeverEnablesTheTimer(t *testing.T) {
	t.Parallel()
	fresh := []string{"getent group docker", usermodDock, composeVer, "getent group ziti", usermodZiti, mkState, mkEtc, mkMetrics, reload}
	upgrade := append(append([]string{}, fresh...), tryRestart)
	noGroups := []string{"getent group docker", composeVer, "getent group ziti", mkState, mkEtc, mkMetrics, reload}
	both := []string{"group:docker", "group:ziti"}
	runScriptCases(t, []scriptCase{
		{script: "postinstall", args: []string{"configure"}, systemd: true, known: both, first: fresh},
		{script: "postinstall", args: []string{"configure", ""}, systemd: true, known: both, first: fresh},
		{script: "postinstall", args: []string{"configure", "0.9.0"}, systemd: true, known: both, first: upgrade},
		{script: "postinstall", args: []string{"1"}, systemd: true, known: both, first: fresh},
		{script: "postinstall", args: []string{"2"}, systemd: true, known: both, first: upgrade},
		// ziti absent (proxy or system transport): no group call for it, nothing fails
		{script: "postinstall", args: []string{"configure"}, systemd: true, known: []string{"group:docker"},
			first: []string{"getent group docker", usermodDock, composeVer, "getent group ziti", mkState, mkEtc, mkMetrics, reload}},
		{script: "postinstall", args: []string{"configure"}, systemd: true, first: noGroups},
		// a container or chroot without systemd as PID 1: no systemctl at all
		{script: "postinstall", args: []string{"configure", "0.9.0"}, systemd: false, known: both,
			first: []string{"getent group docker", usermodDock, composeVer, "getent group ziti", usermodZiti, mkState, mkEtc, mkMetrics}},
		{script: "postinstall", args: []string{"abort-upgrade", "1.0.1"}, systemd: true, known: both, first: []string{}},
		{script: "postinstall", args: []string{"abort-remove"}, systemd: true, known: both, first: []string{}},
		{script: "postinstall", args: []string{"abort-deconfigure", "in-favour", "x", "1.0"}, systemd: true, known: both, first: []string{}},
	})
}

func TestPostinstDirectoryModes(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	env := []string{"MONKY_ROOT=" + s.Root, "MONKY_SYSTEMD_RUN_DIR=" + filepath.Join(s.dir, "absent")}
	script := filepath.Join(testkit.Root(), "packaging", "scripts", "postinstall.sh")
	if code, out := s.run(nil, env, "sh", script, "configure"); code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	s.wantModes(t, map[string]os.FileMode{
		"var/lib/monky-deployd": 0o700,
		"etc/monky-deployd":     0o750,
		// the documented metrics_path directory: the agent (group monky-deployd) writes, node_exporter reads
		"var/lib/prometheus/node-exporter": 0o775,
	})
}

// The 0.1.9 incident: dpkg runs the OLD prerm on an upgrade; disabling there took agents offline.
func TestPrermStopsTheAgentOnlyOnARealRemoval(t *testing.T) {
	t.Parallel()
	removal := []string{isEnabled, disableTimer, stopService, disableProxy}
	var cases []scriptCase
	for _, args := range [][]string{{"remove"}, {"0"}} {
		cases = append(cases, scriptCase{script: "preremove", args: args, systemd: true, first: removal})
		cases = append(cases, scriptCase{script: "preremove", args: args, systemd: false, first: []string{}})
	}
	cases = append(cases, scriptCase{script: "preremove", args: []string{"upgrade", "1.0.1"}, systemd: true,
		first: []string{"dpkg --compare-versions 1.0.1 lt 1.0.0"}})
	for _, args := range [][]string{
		{"failed-upgrade", "1.0.0"}, {"deconfigure", "in-favour", "other", "2.0", "removing", "monky-deployd", "1.0.0"},
		{"1"}, {"2"}, {},
	} {
		cases = append(cases, scriptCase{script: "preremove", args: args, systemd: true, first: []string{}})
	}
	runScriptCases(t, cases)
}

func TestPostrmPurgesOnlyOnPurge(t *testing.T) {
	t.Parallel()
	var cases []scriptCase
	cases = append(cases,
		scriptCase{script: "postremove", args: []string{"remove"}, systemd: true, first: []string{reload}},
		scriptCase{script: "postremove", args: []string{"remove"}, systemd: false, first: []string{}},
		scriptCase{script: "postremove", args: []string{"0"}, systemd: true, first: []string{reload}},
		scriptCase{script: "postremove", args: []string{"purge"}, systemd: true, first: []string{}},
	)
	for _, args := range [][]string{{"upgrade", "1.0.1"}, {"failed-upgrade", "1.0.0"}, {"abort-install"},
		{"abort-install", "0.9.0"}, {"abort-upgrade", "0.9.0"}, {"disappear", "other", "1.0"}, {"1"}} {
		cases = append(cases, scriptCase{script: "postremove", args: args, systemd: true, first: []string{}})
	}
	runScriptCases(t, cases)

	// what each argument does to the files
	for _, c := range []struct {
		args       []string
		stateGone  bool
		etcPresent bool // /etc/monky-deployd holds config.yaml
	}{
		{[]string{"remove"}, false, true},
		{[]string{"upgrade", "1.0.1"}, false, true},
		{[]string{"abort-install"}, false, true},
		{[]string{"0"}, false, true},
		{[]string{"purge"}, true, true},
		{[]string{"purge"}, true, false},
	} {
		s := newSandbox(t)
		stateFile := s.path("var/lib/monky-deployd/bao.token")
		testkit.WriteFile(t, stateFile, "tok", 0o600)
		etc := s.path("etc/monky-deployd")
		if err := os.MkdirAll(etc, 0o750); err != nil {
			t.Fatal(err)
		}
		if c.etcPresent {
			testkit.WriteFile(t, filepath.Join(etc, "config.yaml"), "env_id: env-qa-02\n", 0o640)
		}
		env := []string{"MONKY_ROOT=" + s.Root, "MONKY_SYSTEMD_RUN_DIR=" + filepath.Join(s.dir, "absent")}
		script := filepath.Join(testkit.Root(), "packaging", "scripts", "postremove.sh")
		for run := 0; run < 2; run++ {
			if code, out := s.run(nil, env, "sh", append([]string{script}, c.args...)...); code != 0 {
				t.Fatalf("%v: exit %d: %s", c.args, code, out)
			}
		}
		_, err := os.Stat(stateFile)
		if gone := os.IsNotExist(err); gone != c.stateGone {
			t.Errorf("postrm %v: state removed=%v, want %v", c.args, gone, c.stateGone)
		}
		_, err = os.Stat(etc)
		if kept := err == nil; kept != (c.args[0] != "purge") {
			t.Errorf("postrm %v (config present %v): /etc/monky-deployd kept=%v", c.args, c.etcPresent, kept)
		}
	}
}

// purge removes the agent's own state and config, runs nothing against the services, and leaves
// the deploy directory (the compose project of running containers) with the commands that take
// them down; remove keeps everything and says nothing converges the backend any more.
func TestPostrmPurgeLeavesTheDeployDirAndSaysHowToTakeItDown(t *testing.T) {
	t.Parallel()
	for _, custom := range []bool{false, true} {
		s := newSandbox(t)
		stateDir := "var/lib/monky-deployd"
		deploy := stateDir + "/env-qa-02"
		cfg := "env_id: env-qa-02\nsite: cbs\nmetrics_path: /var/lib/node_exporter/textfile/monky-deployd.prom   # node_exporter\n"
		if custom {
			stateDir, deploy = "srv/monky/state", "srv/monky/deploy"
			cfg += "state_dir: \"/srv/monky/state\"\ndeploy_dir: /srv/monky/deploy\ncompose_project: shop\n"
		}
		for _, f := range []string{"bao.token", "lease.grant", "state.db", "state.db.checked", "state.db.corrupt-20261130T101010Z", "lock", "docker/config.json",
			"metrics.json", "state.json", ".bao.token.tmp-abc"} {
			testkit.WriteFile(t, s.path(stateDir+"/"+f), "x", 0o600)
		}
		testkit.WriteFile(t, s.path(deploy+"/releases/"+strings.Repeat("a", 64)+"/.env"), "SECRET=v", 0o600)
		testkit.WriteFile(t, s.path(deploy+"/releases/"+strings.Repeat("a", 64)+"/compose.yaml"), "services: {}\n", 0o644)
		if err := os.Symlink("releases/"+strings.Repeat("a", 64), s.path(deploy+"/current")); err != nil {
			t.Fatal(err)
		}
		testkit.WriteFile(t, s.path("var/lib/node_exporter/textfile/monky-deployd.prom"), "m 1\n", 0o644)
		testkit.WriteFile(t, s.path("etc/monky-deployd/config.yaml"), cfg, 0o640)
		testkit.WriteFile(t, s.path("etc/monky-deployd/bootstrap.jwt"), "g", 0o600)
		env := []string{"MONKY_ROOT=" + s.Root, "MONKY_SYSTEMD_RUN_DIR=" + filepath.Join(s.dir, "absent")}
		script := filepath.Join(testkit.Root(), "packaging", "scripts", "postremove.sh")

		code, out := s.run(nil, env, "sh", script, "remove")
		if code != 0 || !strings.Contains(out, "Nothing converges the backend now") || !strings.Contains(out, "sudo docker compose -p ") {
			t.Fatalf("remove: exit %d:\n%s", code, out)
		}
		if _, err := os.Stat(s.path(stateDir + "/bao.token")); err != nil {
			t.Fatalf("remove deleted the token")
		}
		// no agent writes the textfile any more: a stale one would keep the staleness alert firing
		if _, err := os.Stat(s.path("var/lib/node_exporter/textfile/monky-deployd.prom")); !os.IsNotExist(err) {
			t.Errorf("remove left the metrics textfile (metrics_path): %v", err)
		}
		testkit.WriteFile(t, s.path("var/lib/node_exporter/textfile/monky-deployd.prom"), "m 1\n", 0o644)

		code, out = s.run(nil, env, "sh", script, "purge")
		if code != 0 {
			t.Fatalf("purge: exit %d:\n%s", code, out)
		}
		project := "monky-env-qa-02"
		if custom {
			project = "shop"
		}
		for _, w := range []string{"Nothing was stopped", "cd /" + deploy + "/current && sudo docker compose -p " + project + " down", "sudo rm -rf /" + deploy, "deluser --system monky-deployd"} {
			if !strings.Contains(out, w) {
				t.Errorf("purge (custom %v) does not say %q:\n%s", custom, w, out)
			}
		}
		left, _ := filepath.Glob(s.path(stateDir + "/*"))
		dot, _ := filepath.Glob(s.path(stateDir + "/.*"))
		left = append(left, dot...)
		if custom && len(left) != 0 || !custom && (len(left) != 1 || left[0] != s.path(deploy)) {
			t.Errorf("purge (custom %v) left in the state dir: %v", custom, left)
		}
		for _, p := range []string{deploy + "/current/.env", deploy + "/current/compose.yaml"} {
			if _, err := os.Stat(s.path(p)); err != nil {
				t.Errorf("purge removed the compose project of running services: %v", err)
			}
		}
		for _, p := range []string{"var/lib/node_exporter/textfile/monky-deployd.prom", "etc/monky-deployd"} {
			if _, err := os.Stat(s.path(p)); !os.IsNotExist(err) {
				t.Errorf("purge left %s", p)
			}
		}
		for _, c := range s.calls() {
			if strings.HasPrefix(c, "docker") || strings.HasPrefix(c, "systemctl") {
				t.Errorf("purge ran %q", c)
			}
		}
	}
}

func TestMaintainerScriptsArePOSIXAndShellcheckClean(t *testing.T) {
	t.Parallel()
	scripts, _ := filepath.Glob(filepath.Join(testkit.Root(), "packaging", "scripts", "*.sh"))
	if len(scripts) != 4 {
		t.Fatalf("want 4 maintainer scripts, found %v", scripts)
	}
	for _, sc := range scripts {
		b, err := os.ReadFile(sc)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), "#!/bin/sh\n") || !strings.Contains(string(b), "\nset -e\n") {
			t.Errorf("%s: must start with #!/bin/sh and set -e", sc)
		}
		// only install.sh and the ansible role enable the timer; postinst gives a reinstall back
		// the enablement prerm remembered (TestReinstallRestoresTheTimersEnablement), nothing else
		body := strings.Replace(string(b), "if [ -e \"$WAS_ENABLED\" ]; then\n    if systemctl enable --now monky-deployd.timer", "", 1)
		if strings.Contains(body, "enable monky-deployd.timer") || strings.Contains(body, "enable --now monky-deployd.timer") {
			t.Errorf("%s enables the timer: only install.sh and the ansible role may", sc)
		}
	}
	sc := needTool(t, "shellcheck", "shellcheck")
	s := newSandbox(t)
	if code, out := s.run(nil, []string{"PATH=/usr/bin:/bin"}, sc, append([]string{"-s", "sh", "-S", "warning"}, scripts...)...); code != 0 {
		t.Errorf("shellcheck: %s", out)
	}
}

// TestPostinstSaysWhatIsMissing: on a box without Docker Engine (no docker group, no docker
// CLI) the install goes on and says, on stderr, what the agent will lack and the fix; with both
// it says nothing of them.
func TestPostinstSaysWhatIsMissing(t *testing.T) {
	t.Parallel()
	script := filepath.Join(testkit.Root(), "packaging", "scripts", "postinstall.sh")
	s := newSandbox(t, "docker")
	env := []string{"MONKY_ROOT=" + s.Root, "MONKY_SYSTEMD_RUN_DIR=" + filepath.Join(s.dir, "absent")}
	code, out := s.run(nil, env, "sh", script, "configure")
	if code != 0 {
		t.Fatalf("postinst failed without docker: exit %d\n%s", code, out)
	}
	for _, w := range []string{"no group docker", "sudo usermod -aG docker monky-deployd", "DOCKER_GROUP_MISSING",
		"the docker CLI (docker, the config's docker_bin) is not there", "sudo apt-get install docker-compose-plugin",
		"/usr/libexec/docker/cli-plugins/docker-compose"} {
		if !strings.Contains(out, w) {
			t.Errorf("postinst without docker does not say %q:\n%s", w, out)
		}
	}
	s = newSandbox(t)
	s.known("group:docker")
	if code, out := s.run(nil, env[:0:0], "sh", script, "configure"); code != 0 || strings.Contains(out, "docker") {
		t.Errorf("postinst with docker and its group: exit %d, said:\n%s", code, out)
	}
}

// TestReinstallRestoresTheTimersEnablement: `dpkg -r` then a reinstall gives the timer back its
// enablement (deb-systemd-helper's semantics): enabled before the removal, enabled again; disabled
// before, still disabled; a purge between forgets it; an upgrade never touches it.
func TestReinstallRestoresTheTimersEnablement(t *testing.T) {
	t.Parallel()
	scripts := filepath.Join(testkit.Root(), "packaging", "scripts")
	for _, c := range []struct {
		name          string
		enabled       bool
		purge         bool
		wantAfter     bool
		reinstallArgs []string
	}{
		{"enabled", true, false, true, []string{"configure", "1.0.0"}},
		{"enabled, rpm", true, false, true, []string{"1"}},
		{"disabled", false, false, false, []string{"configure", "1.0.0"}},
		{"enabled then purged", true, true, false, []string{"configure"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t)
			s.known("group:docker")
			runDir := filepath.Join(s.dir, "run-systemd-system")
			if err := os.MkdirAll(runDir, 0o755); err != nil {
				t.Fatal(err)
			}
			env := []string{"MONKY_ROOT=" + s.Root, "MONKY_SYSTEMD_RUN_DIR=" + runDir}
			if err := os.MkdirAll(s.path("var/lib/monky-deployd"), 0o700); err != nil {
				t.Fatal(err)
			}
			if c.enabled {
				testkit.WriteFile(t, filepath.Join(s.state, "enabled"), "monky-deployd.timer\n", 0o644)
			}
			steps := [][]string{{"preremove", "remove"}, {"postremove", "remove"}}
			if c.purge {
				steps = append(steps, []string{"postremove", "purge"})
			}
			steps = append(steps, append([]string{"postinstall"}, c.reinstallArgs...))
			for _, st := range steps {
				if code, out := s.run(nil, env, "sh", append([]string{filepath.Join(scripts, st[0]+".sh")}, st[1:]...)...); code != 0 {
					t.Fatalf("%v: exit %d\n%s", st, code, out)
				}
				if st[0] == "preremove" && len(s.enabled()) != 0 {
					t.Fatalf("prerm remove left the timer enabled: %v", s.enabled())
				}
			}
			got := strings.Join(s.enabled(), " ") == "monky-deployd.timer"
			if got != c.wantAfter {
				t.Errorf("after the reinstall the timer is enabled=%v, want %v (calls %v)", got, c.wantAfter, s.calls())
			}
			// a second configure (an upgrade later) leaves it as it is
			testkit.WriteFile(t, filepath.Join(s.state, "enabled"), "", 0o644)
			if code, out := s.run(nil, env, "sh", filepath.Join(scripts, "postinstall.sh"), "configure", "1.0.1"); code != 0 || len(s.enabled()) != 0 {
				t.Errorf("an upgrade after the reinstall enabled the timer again: exit %d, %v\n%s", code, s.enabled(), out)
			}
		})
	}
}

// purge runs the agent prerm kept aside (`monky-deployd purge`: the token revoked at OpenBao,
// what stays) before it deletes the token and the config, and deletes that copy with the rest;
// without the copy it says the token was not revoked.
func TestPostrmPurgeRevokesThroughTheKeptAgent(t *testing.T) {
	t.Parallel()
	for _, kept := range []bool{true, false} {
		s := newSandbox(t)
		testkit.WriteFile(t, s.path("var/lib/monky-deployd/bao.token"), "tok\n", 0o600)
		testkit.WriteFile(t, s.path("etc/monky-deployd/config.yaml"), "env_id: env-qa-02\nsite: cbs\n", 0o640)
		helper := s.path("var/lib/monky-deployd/.purge/monky-deployd")
		if kept {
			// the kept agent: what it was given, and whether the token and config were still there
			testkit.WriteFile(t, helper, "#!/bin/sh\necho \"called with $*\"\n[ -e \""+s.path("var/lib/monky-deployd/bao.token")+
				"\" ] && echo 'token: revoked at OpenBao (auth/token/revoke-self), then deleted'\n", 0o755)
		}
		env := []string{"MONKY_ROOT=" + s.Root, "MONKY_SYSTEMD_RUN_DIR=" + filepath.Join(s.dir, "absent")}
		code, out := s.run(nil, env, "sh", filepath.Join(testkit.Root(), "packaging", "scripts", "postremove.sh"), "purge")
		if code != 0 {
			t.Fatalf("purge: exit %d:\n%s", code, out)
		}
		want := []string{"monky-deployd: called with --config " + s.path("etc/monky-deployd/config.yaml") + " purge",
			"monky-deployd: token: revoked at OpenBao (auth/token/revoke-self), then deleted"}
		if !kept {
			want = []string{"monky-deployd: token: NOT revoked (the agent was not kept aside to do it)"}
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("kept %v: purge does not say %q:\n%s", kept, w, out)
			}
		}
		for _, p := range []string{helper, s.path("var/lib/monky-deployd/bao.token")} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("kept %v: purge left %s", kept, p)
			}
		}
	}
}

// postinst checks an existing config with `check config --strict` and says what makes the box
// always red or silent, without failing the install; a config that checks says nothing.
func TestPostinstChecksTheConfigStrictly(t *testing.T) {
	t.Parallel()
	script := filepath.Join(testkit.Root(), "packaging", "scripts", "postinstall.sh")
	for _, bad := range []bool{true, false} {
		s := newSandbox(t)
		s.known("group:docker")
		testkit.WriteFile(t, s.path("etc/monky-deployd/config.yaml"), "env_id: env-qa-02\nsite: cbs\nstale_after_s: 30\n", 0o640)
		env := []string{"MONKY_ROOT=" + s.Root, "MONKY_SYSTEMD_RUN_DIR=" + filepath.Join(s.dir, "absent")}
		if bad {
			env = append(env, "SHIM_CHECK_FAIL=warning: stale_after_s 30 is below two ticks")
		}
		code, out := s.run(nil, env, "sh", script, "configure", "1.0.0")
		if code != 0 {
			t.Fatalf("bad %v: postinst exit %d\n%s", bad, code, out)
		}
		if calls := s.calls(); !slices.Contains(calls, "monky-deployd check config --strict <ROOT>/etc/monky-deployd/config.yaml") {
			t.Errorf("bad %v: postinst did not run check config --strict: %v", bad, calls)
		}
		said := strings.Contains(out, "makes this box always red or silent") && strings.Contains(out, "monky-deployd:   config ") &&
			strings.Contains(out, "stale_after_s 30 is below two ticks")
		if said != bad {
			t.Errorf("bad %v: postinst said:\n%s", bad, out)
		}
	}
}

// postinst judges compose v2 by the docker the config names (docker_bin), not by `docker` on
// PATH, and names where compose v2 comes from on Debian 12 — Docker's apt repository or the
// static plugin — with the commands.
func TestPostinstJudgesComposeByTheConfiguredDocker(t *testing.T) {
	t.Parallel()
	script := filepath.Join(testkit.Root(), "packaging", "scripts", "postinstall.sh")
	// fakeDocker is a docker CLI at /opt/docker/bin/docker in the box that has compose v2 or not,
	// and records the DOCKER_CONFIG it was run with
	fakeDocker := func(s *sandbox, compose bool) {
		exit := "1"
		if compose {
			exit = "0"
		}
		testkit.WriteFile(t, s.path("opt/docker/bin/docker"), "#!/bin/sh\necho \"$DOCKER_CONFIG $*\" >> \""+s.path("docker.log")+"\"\n"+
			"[ \"$1 $2\" = \"compose version\" ] && exit "+exit+"\nexit 0\n", 0o755)
	}
	sources := []string{"sudo apt-get install docker-compose-plugin", "https://download.docker.com/linux/debian/gpg",
		"/usr/libexec/docker/cli-plugins/docker-compose", "docker-compose-linux-x86_64"}
	for _, c := range []struct {
		name         string
		pathDocker   bool // a docker with compose v2 on PATH
		docker       bool // /opt/docker/bin/docker exists
		compose      bool // and has compose v2
		config       string
		want, forbid []string
	}{
		{"docker_bin elsewhere with compose, none on PATH", false, true, true,
			"docker_bin: /opt/docker/bin/docker   # the box's own\nstate_dir: /srv/monky\n", nil, []string{"compose", "docker CLI"}},
		{"docker_bin elsewhere without compose, docker on PATH has it", true, true, false,
			"docker_bin: \"/opt/docker/bin/docker\"\n",
			append([]string{"/opt/docker/bin/docker has no compose v2 (/opt/docker/bin/docker compose version fails, as the agent runs it)",
				"sudo -u monky-deployd DOCKER_CONFIG=/var/lib/monky-deployd/docker /opt/docker/bin/docker compose version"}, sources...), nil},
		{"docker_bin that is not there", true, false, false, "docker_bin: /opt/docker/bin/docker\n",
			append([]string{"the docker CLI (/opt/docker/bin/docker, the config's docker_bin) is not there"}, sources...), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var s *sandbox
			if c.pathDocker {
				s = newSandbox(t)
			} else {
				s = newSandbox(t, "docker")
			}
			s.known("group:docker")
			testkit.WriteFile(t, s.path("etc/monky-deployd/config.yaml"), "env_id: env-qa-02\nsite: cbs\n"+c.config, 0o640)
			if c.docker {
				fakeDocker(s, c.compose)
			}
			env := []string{"MONKY_ROOT=" + s.Root, "MONKY_SYSTEMD_RUN_DIR=" + filepath.Join(s.dir, "absent")}
			code, out := s.run(nil, env, "sh", script, "configure", "1.0.0")
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("postinst does not say %q:\n%s", w, out)
				}
			}
			for _, f := range c.forbid {
				if strings.Contains(out, f) {
					t.Errorf("postinst says %q:\n%s", f, out)
				}
			}
			if slices.Contains(s.calls(), composeVer) {
				t.Errorf("postinst ran `docker compose version` from PATH, not the config's docker_bin")
			}
			if c.docker {
				log, _ := os.ReadFile(s.path("docker.log"))
				state := "/var/lib/monky-deployd"
				if strings.Contains(c.config, "/srv/monky") {
					state = "/srv/monky"
				}
				if want := s.Root + state + "/docker compose version\n"; string(log) != want {
					t.Errorf("the configured docker was run as %q, want %q (the agent's DOCKER_CONFIG)", log, want)
				}
			}
		})
	}
}

// A downgrade to a release whose unit cannot write node_exporter's textfile directory (the
// previous release, 1.0.0~<commit>): this package's prerm, run by dpkg with `upgrade <older>`,
// leaves a drop-in that gives the older unit the path the shipped unit has, and says so; an
// upgrade leaves none; the next postinst of this package removes it.
func TestDowngradeKeepsTheMetricsDirectoryWritable(t *testing.T) {
	t.Parallel()
	scripts := filepath.Join(testkit.Root(), "packaging", "scripts")
	dropin := "etc/systemd/system/monky-deployd.service.d/monky-deployd-metrics.conf"
	unit := unitKeys(t, "monky-deployd.service")
	var metricsDir string
	for _, p := range strings.Fields(strings.Join(unit["ReadWritePaths"], " ")) {
		if strings.Contains(p, "prometheus") {
			metricsDir = p
		}
	}
	if metricsDir == "" {
		t.Fatalf("the unit's ReadWritePaths= has no metrics directory: %v", unit["ReadWritePaths"])
	}
	for _, c := range []struct {
		older string
		want  bool
	}{{"1.0.0~8d0d22d", true}, {"0.1.9", true}, {"1.0.1", false}, {"1.0.0", false}} {
		s := newSandbox(t)
		env := []string{"MONKY_ROOT=" + s.Root, "MONKY_SYSTEMD_RUN_DIR=" + filepath.Join(s.dir, "run-systemd-system")}
		code, out := s.run(nil, env, "sh", filepath.Join(scripts, "preremove.sh"), "upgrade", c.older)
		if code != 0 {
			t.Fatalf("%s: prerm upgrade: exit %d\n%s", c.older, code, out)
		}
		b, err := os.ReadFile(s.path(dropin))
		if got := err == nil; got != c.want {
			t.Fatalf("prerm upgrade %s: drop-in written %v, want %v\n%s", c.older, got, c.want, out)
		}
		if !c.want {
			continue
		}
		if !strings.Contains(string(b), "\n[Service]\nReadWritePaths="+metricsDir+"\n") {
			t.Errorf("the drop-in does not give the unit's %s:\n%s", metricsDir, b)
		}
		if !strings.Contains(out, "downgrade to "+c.older+": /"+dropin+" keeps /var/lib/prometheus/node-exporter writable") {
			t.Errorf("prerm does not say what it left:\n%s", out)
		}
		// the upgrade back: this package's unit has the path, the drop-in goes
		code, out = s.run(nil, env, "sh", filepath.Join(scripts, "postinstall.sh"), "configure", c.older)
		if code != 0 {
			t.Fatalf("postinst: exit %d\n%s", code, out)
		}
		if _, err := os.Stat(s.path(dropin)); !os.IsNotExist(err) {
			t.Errorf("postinst after %s left the drop-in: %v", c.older, err)
		}
		if !strings.Contains(out, "removed /"+dropin) {
			t.Errorf("postinst does not say it removed the drop-in:\n%s", out)
		}
	}
}
