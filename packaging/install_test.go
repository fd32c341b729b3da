package packaging

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
)

const secretToken = "glpat-SECRET-deploy-token-7f3a"

var fakeDebSha = func() string { h := sha256.Sum256([]byte("FAKEDEB")); return hex.EncodeToString(h[:]) }()

// installBox is a sandbox laid out like an Ubuntu box whose os-release carries the VERSION that
// once leaked into the download name.
func installBox(t *testing.T, without ...string) *sandbox {
	s := newSandbox(t, without...)
	testkit.WriteFile(t, s.path("etc/os-release"), "PRETTY_NAME=\"Ubuntu Resolute\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"26.04\"\n"+
		"VERSION=\"26.04 LTS (Resolute Raccoon)\"\nID=ubuntu\nVERSION_CODENAME=resolute\n", 0o644)
	if err := os.MkdirAll(s.path("opt/openziti/etc/identities"), 0o755); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, filepath.Join(s.dir, "kit", "bootstrap.jwt"), "eyJhbGciOiJFUzI1NiJ9.grant.sig", 0o600)
	testkit.WriteFile(t, filepath.Join(s.dir, "kit", "monky-host.env-qa-02.jwt"), "eyJhbGciOiJSUzI1NiJ9.enrol.sig", 0o600)
	s.known("group:docker", "group:ziti", "group:monky-deployd", "passwd:monky-deployd")
	return s
}

func (s *sandbox) install(stdinScript bool, env []string, args ...string) (int, string) {
	s.t.Helper()
	script := filepath.Join(testkit.Root(), "packaging", "install.sh")
	env = append([]string{"MONKY_ROOT=" + s.Root, "SHIM_DEB_SHA=" + fakeDebSha}, env...)
	if stdinScript { // curl … | sudo bash -s -- …: stdin IS the script
		b, err := os.ReadFile(script)
		if err != nil {
			s.t.Fatal(err)
		}
		return s.run(b, env, "bash", append([]string{"-s", "--"}, args...)...)
	}
	return s.run(nil, env, "bash", append([]string{script}, args...)...)
}

func kitArgs(s *sandbox) []string {
	return []string{"--env", "env-qa-02", "--site", "cbs",
		"--bootstrap-file", filepath.Join(s.dir, "kit", "bootstrap.jwt"),
		"--enrol-jwt", filepath.Join(s.dir, "kit", "monky-host.env-qa-02.jwt")}
}

func indexOf(calls []string, prefix string) int {
	return slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, prefix) })
}

func mustCall(t *testing.T, calls []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(calls, w) {
			t.Errorf("missing call %q in\n  %s", w, strings.Join(calls, "\n  "))
		}
	}
}

func TestInstallFreshBoxFromThePipedKit(t *testing.T) {
	t.Parallel()
	for _, via := range []string{"env", "flag"} {
		t.Run("token-via-"+via, func(t *testing.T) {
			t.Parallel()
			s := installBox(t, "docker")
			args := append(kitArgs(s), "--docker-data-root", "/home/docker-data")
			var env []string
			if via == "env" {
				env = []string{"MONKY_DEPLOYD_TOKEN=" + secretToken}
			} else {
				args = append(args, "--token", secretToken)
			}
			code, out := s.install(true, env, args...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			raw := s.rawLog()
			calls := s.calls()

			// the token reached curl only through its 0600 -K file, never an argv or the output
			if strings.Contains(raw, secretToken) || strings.Contains(out, secretToken) {
				t.Errorf("the deploy token appears in a command line or the output")
			}
			cfg, _ := os.ReadFile(filepath.Join(s.state, "curlcfg"))
			if !strings.Contains(string(cfg), "mode=600\n") || !strings.Contains(string(cfg), `header = "DEPLOY-TOKEN: `+secretToken+`"`) {
				t.Errorf("curl config: %q", cfg)
			}
			// the version is the script's own, never os-release's VERSION
			debURL := "https://scm.tikali.ai/api/v4/projects/69/packages/generic/monky-deployd/1.0.0/monky-deployd_1.0.0_amd64.deb"
			if i := indexOf(calls, "curl "); i < 0 || !strings.Contains(strings.Join(calls, "\n"), debURL) {
				t.Errorf("no download of %s", debURL)
			}
			if strings.Contains(raw, "26.04") || strings.Contains(raw, "Raccoon") {
				t.Errorf("os-release's VERSION leaked into a command:\n%s", raw)
			}
			mustCall(t, calls,
				"apt-get install -y -q docker-ce docker-ce-cli containerd.io docker-buildx-plugin docker-compose-plugin",
				"ziti-edge-tunnel enroll --jwt <DIR>/kit/monky-host.env-qa-02.jwt --identity <ROOT>/opt/openziti/etc/identities/monky-host.env-qa-02.json",
				"usermod -a -G ziti monky-deployd",
				"usermod -a -G docker monky-deployd",
				"setfacl -m u:monky-deployd:r <ROOT>/opt/openziti/etc/identities/monky-host.env-qa-02.json",
				"setfacl -m u:monky-deployd:rx <ROOT>/opt/openziti/etc/identities",
				"setfacl -d -m u:monky-deployd:r <ROOT>/opt/openziti/etc/identities",
				"systemctl enable --now monky-deployd.timer",
				"systemctl start monky-deployd.service",
			)
			if i, j := indexOf(calls, "dpkg -i <DIR>/tmp/"), indexOf(calls, "systemctl enable --now monky-deployd.timer"); i < 0 || j < i {
				t.Errorf("the .deb must be installed (at %d) before the timer is enabled (at %d)", i, j)
			}
			if i, j := indexOf(calls, "systemctl enable --now monky-deployd.timer"), indexOf(calls, "systemctl start monky-deployd.service"); j < i {
				t.Errorf("the tick ran before the timer was enabled")
			}
			for _, c := range calls {
				if strings.Contains(c, "monky-deployd-proxy") {
					t.Errorf("transport sdk must not touch the proxy unit: %s", c)
				}
			}
			if got := s.enabled(); !slices.Equal(got, []string{"monky-deployd.timer", "ziti-edge-tunnel.service"}) {
				t.Errorf("enabled units %v", got)
			}

			conf, err := os.ReadFile(s.path("etc/monky-deployd/config.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			// no --transport: the package's default (this one has no OpenZiti SDK), and it says so
			if !strings.Contains(out, "transport: system (the package's default; this package has: proxy system)") {
				t.Errorf("install.sh does not say which transport it chose:\n%s", out)
			}
			for _, want := range []string{"env_id: env-qa-02\n", "site: cbs\n", "transport: system\n",
				"identity: /opt/openziti/etc/identities/monky-host.env-qa-02.json\n", "  port: 443 ",
				"  addr: https://bao.cbs.tikali.net:8200\n", "laptop_mode: false\n"} {
				if !strings.Contains(string(conf), want) {
					t.Errorf("config.yaml lacks %q:\n%s", want, conf)
				}
			}
			if strings.Contains(string(conf), "8081") {
				t.Errorf("config.yaml names the in-pod port 8081:\n%s", conf)
			}
			grant := s.path("etc/monky-deployd/bootstrap.jwt")
			if b, _ := os.ReadFile(grant); string(b) != "eyJhbGciOiJFUzI1NiJ9.grant.sig" {
				t.Errorf("bootstrap grant content %q", b)
			}
			s.wantModes(t, map[string]os.FileMode{
				"etc/monky-deployd/config.yaml":                         0o640,
				"etc/monky-deployd/bootstrap.jwt":                       0o600,
				"etc/monky-deployd":                                     0o750,
				"var/lib/monky-deployd":                                 0o700,
				"opt/openziti/etc/identities/monky-host.env-qa-02.json": 0o640,
			})
			if _, err := os.Stat(filepath.Join(s.dir, "kit", "monky-host.env-qa-02.jwt")); !os.IsNotExist(err) {
				t.Errorf("the spent enrolment JWT was not deleted")
			}
			// transport system: the tunneller intercepts (run), it does not only host (run-host)
			dropIn, _ := os.ReadFile(s.path("etc/systemd/system/ziti-edge-tunnel.service.d/run.conf"))
			if !strings.Contains(string(dropIn), "\nExecStartPre=\n") || !strings.Contains(string(dropIn), "ziti-edge-tunnel run --identity-dir=") {
				t.Errorf("the run drop-in must clear ExecStartPre and run the tunneller in run mode:\n%s", dropIn)
			}
			if _, err := os.Stat(s.path("etc/systemd/system/ziti-edge-tunnel.service.d/run-host.conf")); !os.IsNotExist(err) {
				t.Errorf("transport system with a run-host drop-in: nothing would intercept")
			}
			daemon, _ := os.ReadFile(s.path("etc/docker/daemon.json"))
			if !strings.Contains(string(daemon), `"data-root": "/home/docker-data"`) {
				t.Errorf("daemon.json: %q", daemon)
			}
			if leftovers, _ := filepath.Glob(filepath.Join(s.dir, "tmp", "*")); len(leftovers) != 0 {
				t.Errorf("temporary files left behind (the curl config holds the token): %v", leftovers)
			}
		})
	}
}

// env-qa-02: the tunneller failed to start and `set -e` aborted the install before config, ACLs, the
// grant and the timer existed, so a second kit was needed. Now the failure waits until the end, and a
// re-run with the same (spent) kit completes.
func TestInstallTunnellerFailureIsReportedLastAndARerunCompletes(t *testing.T) {
	t.Parallel()
	s := installBox(t)
	code, out := s.install(false, []string{"SHIM_SYSTEMCTL_FAIL=restart ziti-edge-tunnel.service"}, kitArgs(s)...)
	if code == 0 {
		t.Fatalf("a tunneller that does not start must fail the install at the end:\n%s", out)
	}
	if !strings.Contains(out, "WARNING: ziti-edge-tunnel did not start") || !strings.Contains(out, "no new kit") {
		t.Errorf("output must warn first and say a re-run needs no new kit:\n%s", out)
	}
	calls := s.calls()
	mustCall(t, calls, "systemctl enable --now monky-deployd.timer")
	if slices.Contains(calls, "systemctl start monky-deployd.service") {
		t.Errorf("no tick while the mesh is down")
	}
	for _, p := range []string{"etc/monky-deployd/config.yaml", "etc/monky-deployd/bootstrap.jwt",
		"opt/openziti/etc/identities/monky-host.env-qa-02.json"} {
		if _, err := os.Stat(s.path(p)); err != nil {
			t.Errorf("%s must exist after a tunneller failure: %v", p, err)
		}
	}

	// the re-run: the enrolment JWT is spent and gone; the identity and staged grant are reused
	code, out = s.install(false, nil, "--env", "env-qa-02", "--site", "cbs")
	if code != 0 {
		t.Fatalf("re-run: exit %d:\n%s", code, out)
	}
	calls = s.calls()
	if indexOf(calls, "ziti-edge-tunnel enroll") >= 0 {
		t.Errorf("the re-run enrolled again")
	}
	mustCall(t, calls, "systemctl restart ziti-edge-tunnel.service", "systemctl start monky-deployd.service")
	if b, _ := os.ReadFile(s.path("etc/monky-deployd/bootstrap.jwt")); string(b) != "eyJhbGciOiJFUzI1NiJ9.grant.sig" {
		t.Errorf("the staged grant was lost on the re-run: %q", b)
	}
}

func TestInstallRefusesADebThatDoesNotMatchItsSha256(t *testing.T) {
	t.Parallel()
	s := installBox(t)
	code, out := s.install(false, []string{"SHIM_DEB_SHA=" + strings.Repeat("0", 64)}, kitArgs(s)...)
	if code == 0 || !strings.Contains(out, "does not match its .sha256") {
		t.Fatalf("exit %d, want a checksum refusal:\n%s", code, out)
	}
	calls := s.calls()
	if indexOf(calls, "dpkg") >= 0 || indexOf(calls, "systemctl") >= 0 {
		t.Errorf("nothing may be installed after a checksum mismatch:\n%s", strings.Join(calls, "\n"))
	}
}

func TestInstallLeavesAnExistingDockerAlone(t *testing.T) {
	t.Parallel()
	s := installBox(t)
	code, out := s.install(false, nil, append(kitArgs(s), "--docker-data-root", "/srv/docker")...)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, c := range s.calls() {
		if strings.HasPrefix(c, "apt-get") {
			t.Errorf("existing docker/ziti/acl: no apt-get expected, got %s", c)
		}
	}
	if _, err := os.Stat(s.path("etc/docker/daemon.json")); !os.IsNotExist(err) {
		t.Errorf("daemon.json written for an existing Docker")
	}
}

func TestInstallFallsBackToDockerIO(t *testing.T) {
	t.Parallel()
	s := installBox(t, "docker")
	code, out := s.install(false, []string{"SHIM_APT_FAIL=docker-ce"}, kitArgs(s)...)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	calls := s.calls()
	mustCall(t, calls, "apt-get install -y -q docker.io")
	if _, err := os.Stat(s.path("etc/apt/sources.list.d/docker.list")); !os.IsNotExist(err) {
		t.Errorf("the failed docker suite must not stay in sources.list.d")
	}
}

// A package built with the OpenZiti SDK defaults to sdk, and the tunneller only hosts (run-host).
func TestInstallDefaultTransportOfAnSDKBuild(t *testing.T) {
	t.Parallel()
	s := installBox(t)
	code, out := s.install(false, []string{"SHIM_SDK=1"}, kitArgs(s)...)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	conf, _ := os.ReadFile(s.path("etc/monky-deployd/config.yaml"))
	if !strings.Contains(string(conf), "transport: sdk\n") || !strings.Contains(out, "transport: sdk (the package's default;") {
		t.Errorf("config.yaml:\n%s\noutput:\n%s", conf, out)
	}
	dropIn, _ := os.ReadFile(s.path("etc/systemd/system/ziti-edge-tunnel.service.d/run-host.conf"))
	if !strings.Contains(string(dropIn), "\nExecStartPre=\n") || !strings.Contains(string(dropIn), " run-host ") {
		t.Errorf("run-host drop-in must clear ExecStartPre and run run-host:\n%s", dropIn)
	}
}

// --transport sdk with a package that has no SDK would fail every tick: refused, saying what the
// package has, before the config, the grant or the timer.
func TestInstallRefusesATransportThePackageLacks(t *testing.T) {
	t.Parallel()
	s := installBox(t)
	code, out := s.install(false, nil, append(kitArgs(s), "--transport", "sdk")...)
	if code != 1 || !strings.Contains(out, "transport sdk is not built into monky-deployd 1.0.0 (it has: proxy system)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(s.path("etc/monky-deployd/config.yaml")); !os.IsNotExist(err) {
		t.Errorf("a config naming a transport the package lacks was written")
	}
	if slices.Contains(s.calls(), "systemctl enable --now monky-deployd.timer") {
		t.Errorf("the timer was enabled")
	}
}

func TestInstallProxyTransport(t *testing.T) {
	t.Parallel()
	s := installBox(t)
	code, out := s.install(false, nil, append(kitArgs(s), "--transport", "proxy", "--source", "gitea")...)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	calls := s.calls()
	mustCall(t, calls, "systemctl enable --now monky-deployd-proxy.service")
	if !strings.Contains(strings.Join(calls, "\n"), "releases/download/v1.0.0/monky-deployd_1.0.0_amd64.deb") {
		t.Errorf("--source gitea must download the Gitea release")
	}
	env, _ := os.ReadFile(s.path("etc/monky-deployd/proxy.env"))
	if string(env) != "MONKY_DEPLOYD_IDENTITY=/opt/openziti/etc/identities/monky-host.env-qa-02.json\n" {
		t.Errorf("proxy.env: %q", env)
	}
	conf, _ := os.ReadFile(s.path("etc/monky-deployd/config.yaml"))
	if !strings.Contains(string(conf), "transport: proxy\n") {
		t.Errorf("config.yaml:\n%s", conf)
	}
}

func TestInstallRefusesBadArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--site", "cbs"},
		{"--env", "env-qa-02"},
		{"--env", "qa02", "--site", "cbs"},
		{"--env", "env-qa-02", "--site", "cbs", "--transport", "carrier-pigeon"},
		{"--env", "env-qa-02", "--site", "cbs", "--version", "26.04 LTS"},
		{"--env", "env-qa-02", "--site", "cbs", "--bogus"},
	} {
		s := installBox(t)
		if code, out := s.install(false, nil, args...); code != 1 || !strings.Contains(out, "error:") {
			t.Errorf("%v: exit %d, want 1 with an error line:\n%s", args, code, out)
		}
		if calls := s.calls(); len(calls) != 0 {
			t.Errorf("%v: a refused invocation ran %v", args, calls)
		}
	}
}

func TestInstallScriptIsShellClean(t *testing.T) {
	t.Parallel()
	script := filepath.Join(testkit.Root(), "packaging", "install.sh")
	s := newSandbox(t)
	if code, out := s.run(nil, nil, "bash", "-n", script); code != 0 {
		t.Fatalf("bash -n: %s", out)
	}
	sc := needTool(t, "shellcheck", "shellcheck")
	if code, out := s.run(nil, []string{"PATH=/usr/bin:/bin"}, sc, "-S", "warning", script); code != 0 {
		t.Errorf("shellcheck -S warning:\n%s", out)
	}
}

// The binary's version has one source, the VERSION file; the installer's default and the ansible
// role's pin must follow it.
func TestDefaultVersionsFollowTheVersionFile(t *testing.T) {
	t.Parallel()
	root := testkit.Root()
	v, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(v))
	script, _ := os.ReadFile(filepath.Join(root, "packaging", "install.sh"))
	if !strings.Contains(string(script), "\nDEFAULT_VERSION=\""+version+"\"\n") {
		t.Errorf("install.sh DEFAULT_VERSION is not %q", version)
	}
	defaults, _ := os.ReadFile(filepath.Join(root, "packaging", "ansible", "roles", "monky_deployd", "defaults", "main.yml"))
	if !strings.Contains(string(defaults), "\nmonky_deployd_version: \""+version+"\"\n") {
		t.Errorf("ansible monky_deployd_version is not %q", version)
	}
}

// TestInstallChecksTheConfigBeforeItReplacesOne: install.sh has the installed agent check the
// config it wrote (with metrics_path on) before it replaces the box's; a config that does not
// check stops the install with the agent's words and leaves the old config and the timer alone.
func TestInstallChecksTheConfigBeforeItReplacesOne(t *testing.T) {
	t.Parallel()
	s := installBox(t)
	code, out := s.install(false, nil, kitArgs(s)...)
	if code != 0 {
		t.Fatalf("install: exit %d\n%s", code, out)
	}
	calls := s.calls()
	check := indexOf(calls, "monky-deployd check config ")
	if check < 0 || check > indexOf(calls, "systemctl enable --now monky-deployd.timer") {
		t.Fatalf("install.sh did not check the config before enabling the timer:\n%s", strings.Join(calls, "\n"))
	}
	cfg, err := os.ReadFile(s.path("etc/monky-deployd/config.yaml"))
	if err != nil || !strings.Contains(string(cfg), "metrics_path: /var/lib/prometheus/node-exporter/monky_deployd.prom") {
		t.Errorf("config.yaml lacks the documented metrics_path (%v):\n%s", err, cfg)
	}

	s = installBox(t)
	testkit.WriteFile(t, s.path("etc/monky-deployd/config.yaml"), "# the box's own\n", 0o640)
	code, out = s.install(false, []string{"SHIM_CHECK_FAIL=unknown key \"bogus\""}, kitArgs(s)...)
	if code == 0 || !strings.Contains(out, `line 3: unknown key "bogus"`) || !strings.Contains(out, "nothing was replaced") {
		t.Errorf("a config that does not check: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(s.path("etc/monky-deployd/config.yaml")); string(b) != "# the box's own\n" {
		t.Errorf("the box's config was replaced by one that does not check:\n%s", b)
	}
	if indexOf(s.calls(), "systemctl enable --now monky-deployd.timer") >= 0 {
		t.Error("the timer was enabled after the config failed its check")
	}
}
