package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/testkit"
)

// runIn runs the agent in this process: stdout, stderr, exit code.
func runIn(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := run(append([]string{"monky-deployd"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

// TestCheckConfig: every problem of a config is a line naming its line and key, in the file's
// order (an unknown key one edit from a known one with its did-you-mean), and exit 1; a good config exits 0; the --config path is the default; nothing is
// created, not even the state_dir the config names.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	bad := filepath.Join(dir, "bad.yaml")
	testkit.WriteFile(t, bad, "env_id: env-qa-02\nsite: two words\ndocker_bni: /usr/bin/docker\n"+
		"tenancy:\n  port: abc\n  bse_url: http://x\nstate_dir: "+state+"\nlog_level: LOUD\n", 0o600)
	good := filepath.Join(dir, "good.yaml")
	testkit.WriteFile(t, good, "env_id: env-qa-02\nsite: cbs\nstate_dir: "+state+"\n", 0o600)
	sdk := filepath.Join(dir, "sdk.yaml")
	testkit.WriteFile(t, sdk, "env_id: env-qa-02\nsite: cbs\ntransport: sdk\n", 0o600)
	before := dirState(t, dir)

	o, e, c := runIn("check", "config", bad)
	lines := strings.Split(strings.TrimRight(o, "\n"), "\n")
	want := []string{
		`line 2: site "two words" must be one word`,
		`line 3: unknown key "docker_bni" (did you mean "docker_bin"?)`,
		`line 5: tenancy.port: want an integer, got "abc"`,
		`line 6: unknown key "tenancy.bse_url" (did you mean "tenancy.base_url"?)`,
		`line 8: log_level "LOUD" must be DEBUG, INFO, WARN or ERROR`,
	}
	if c != 1 || e != "" || len(lines) != len(want) {
		t.Fatalf("check config: exit %d, stderr %q, want exit 1 and %d lines:\n%s", c, e, len(want), o)
	}
	for i, w := range want {
		if lines[i] != "config "+bad+": "+w {
			t.Errorf("line %d: %q\nwant %q", i+1, lines[i], "config "+bad+": "+w)
		}
	}
	// the tick's loader says the first of them, in the same words
	if _, err := config.Load(bad); err == nil || !strings.Contains(o, err.Error()) {
		t.Errorf("config.Load says %v; not among check's lines", err)
	}

	if o, e, c := runIn("--config", good, "check", "config"); c != 0 || !strings.Contains(o, "config "+good+": ok") || e != "" {
		t.Errorf("check config of --config's good file: exit %d\n%s%s", c, o, e)
	}
	if o, _, c := runIn("check", "config", "../../config.example.yaml"); c != 0 {
		t.Errorf("config.example.yaml: exit %d\n%s", c, o)
	}
	if o, _, c := runIn("check", "config", sdk); config.SDKBuiltIn {
		if c != 0 || !strings.Contains(o, "transport sdk)") {
			t.Errorf("transport sdk in a build with the SDK: exit %d\n%s", c, o)
		}
	} else if c != 1 || !strings.Contains(o, "line 3: transport sdk is not in this build") {
		t.Errorf("transport sdk in a build without the SDK: exit %d\n%s", c, o)
	}
	if o, _, c := runIn("check", "config", filepath.Join(dir, "absent.yaml")); c != 1 || !strings.Contains(o, "no such file") {
		t.Errorf("a missing file: exit %d\n%s", c, o)
	}
	if after := dirState(t, dir); after != before {
		t.Errorf("check config changed the directory:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if _, _, c := runIn("check", "config", good, bad); c != 1 {
		t.Errorf("two files: exit %d, want a usage error", c)
	}
}

// TestCheckBundle runs check bundle on the repository's bundles: a good one exits 0; a
// privileged one gives a line per finding naming the service and the field; --env and
// --allow-rollback are the box's facts; an unpacked bundle is checked like its archive;
// nothing is left in the temporary directory or beside the bundle.
func TestCheckBundle(t *testing.T) {
	tmp := t.TempDir()
	bundles := filepath.Join(testkit.Root(), "testdata", "bundles")
	before := dirState(t, bundles)
	t.Setenv("TMPDIR", tmp)

	o, e, c := runIn("check", "bundle", filepath.Join(bundles, "qa-basic.tar.gz"))
	if c != 0 || e != "" || !regexp.MustCompile(`^bundle \S+qa-basic.tar.gz: ok: sha [0-9a-f]{12}, env env-qa-02: a box would apply it\n$`).MatchString(o) {
		t.Errorf("qa-basic: exit %d\n%s%s", c, o, e)
	}

	o, _, c = runIn("check", "bundle", filepath.Join(bundles, "qa-privileged.tar.gz"))
	lines := strings.Split(strings.TrimRight(o, "\n"), "\n")
	if c != 1 || len(lines) < 2 {
		t.Fatalf("qa-privileged: exit %d, want 1 and a line per finding:\n%s", c, o)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "PRIVILEGED_REFUSED: service node-agent: ") {
			t.Errorf("line %q does not name the code, the service and the field", l)
		}
	}
	for _, field := range []string{"privileged: true", "pid: host"} {
		if !strings.Contains(o, "service node-agent: "+field+"\n") {
			t.Errorf("no line of its own for %s:\n%s", field, o)
		}
	}

	o, _, c = runIn("check", "bundle", "--env", "env-qa-03", filepath.Join(bundles, "qa-basic.tar.gz"))
	if c != 1 || !strings.HasPrefix(o, "BUNDLE_ENV_MISMATCH: bundle is for env-qa-02, this agent is env-qa-03\n") {
		t.Errorf("--env env-qa-03: exit %d\n%s", c, o)
	}
	o, _, c = runIn("check", "bundle", "--allow-rollback", filepath.Join(bundles, "qa-basic.tar.gz"))
	if c != 1 || !strings.HasPrefix(o, "ROLLBACK_REFUSED: ") || !strings.Contains(o, "agent.allow_rollback is not set") {
		t.Errorf("--allow-rollback: exit %d\n%s", c, o)
	}

	// unpacked: the archive's files as a directory
	dir := filepath.Join(t.TempDir(), "unpacked")
	files := testkit.Bundle("env-qa-02", map[string]string{"compose.yaml": "services:\n  api:\n    image: x\n    cap_add: [SYS_ADMIN]\n"})
	for n, body := range files {
		testkit.WriteFile(t, filepath.Join(dir, n), body, 0o644)
	}
	if o, _, c := runIn("check", "bundle", dir); c != 1 || o != "PRIVILEGED_REFUSED: service api: cap_add SYS_ADMIN (bundle.json agent.allow_privileged is not set)\n" {
		t.Errorf("unpacked privileged bundle: exit %d\n%s", c, o)
	}

	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("check bundle left %d entries in the temporary directory", len(left))
	}
	if after := dirState(t, bundles); after != before {
		t.Error("check bundle changed testdata/bundles")
	}
	if _, e, c := runIn("check", "bundle"); c != 1 || !strings.Contains(e, "check bundle") && !strings.Contains(e, "name a bundle") {
		t.Errorf("no argument: exit %d, %q", c, e)
	}
	if _, e, c := runIn("check", "bundle", "--nope", dir); c != 1 || strings.Count(e, "\n") != 1 || !strings.Contains(e, "unknown flag --nope") {
		t.Errorf("unknown flag: exit %d, %q; want one usage line", c, e)
	}
}

// TestBootstrapEmptyGrant: `bootstrap --force` with an empty grant file says it is empty, not
// that there is none; resume's check says the same.
func TestBootstrapEmptyGrant(t *testing.T) {
	dir := t.TempDir()
	grant := filepath.Join(dir, "bootstrap.jwt")
	testkit.WriteFile(t, grant, "", 0o600)
	cfg := filepath.Join(dir, "config.yaml")
	testkit.WriteFile(t, cfg, "env_id: env-qa-02\nsite: cbs\ntransport: system\nstate_dir: "+filepath.Join(dir, "state")+
		"\nbootstrap_path: "+grant+"\n", 0o600)
	_, e, c := runIn("--config", cfg, "bootstrap", "--force")
	if c != 1 || !strings.Contains(e, "the bootstrap grant at "+grant+" is empty") || strings.Contains(e, "no bootstrap grant") {
		t.Errorf("bootstrap --force with an empty grant: exit %d, %q", c, e)
	}
	if err := os.Remove(grant); err != nil {
		t.Fatal(err)
	}
	if _, e, c := runIn("--config", cfg, "bootstrap", "--force"); c != 1 || !strings.Contains(e, "no bootstrap grant at "+grant) {
		t.Errorf("bootstrap --force with no grant: exit %d, %q", c, e)
	}
}

// TestStatusNamesPrivateTmp: with no state file and state_dir under /tmp, status says that the
// unit's /tmp is private (PrivateTmp=yes); under another directory it does not.
func TestStatusNamesPrivateTmp(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		stateDir string
		want     bool
	}{
		{fmt.Sprintf("/tmp/monky-deployd-status-%d/state", os.Getpid()), true},
		{fmt.Sprintf("/var/tmp/monky-deployd-status-%d", os.Getpid()), true},
		{fmt.Sprintf("/var/lib/monky-deployd-status-%d", os.Getpid()), false},
	} {
		cfg := filepath.Join(dir, "config.yaml")
		testkit.WriteFile(t, cfg, "env_id: env-qa-02\nsite: cbs\nstate_dir: "+c.stateDir+"\n", 0o600)
		_, e, code := runIn("--config", cfg, "status")
		if code != 1 || !strings.Contains(e, "no state file at "+c.stateDir+"/state.db") || strings.Contains(e, "PrivateTmp=yes") != c.want {
			t.Errorf("state_dir %s: exit %d, %q; want PrivateTmp named: %v", c.stateDir, code, e, c.want)
		}
		if _, err := os.Stat(c.stateDir); !os.IsNotExist(err) {
			t.Errorf("status created %s", c.stateDir)
		}
	}
}
