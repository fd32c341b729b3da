package packaging

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/testkit"
)

// Every YAML file of the role parses; the tenancy port is 443 (DD-0523: the role still said 8081
// after install.sh moved to 443); every task that touches the download token or the grant is no_log.
func TestAnsibleRole(t *testing.T) {
	t.Parallel()
	role := filepath.Join(testkit.Root(), "packaging", "ansible", "roles", "monky_deployd")
	files, _ := filepath.Glob(filepath.Join(role, "*", "*.yml"))
	if len(files) < 3 {
		t.Fatalf("role YAML files: %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}

	var defaults map[string]any
	b, _ := os.ReadFile(filepath.Join(role, "defaults", "main.yml"))
	if err := yaml.Unmarshal(b, &defaults); err != nil {
		t.Fatal(err)
	}
	if p, ok := defaults["monky_deployd_tenancy_port"]; !ok || p != nil {
		t.Errorf("monky_deployd_tenancy_port = %v, want null (the agent's 443, the intercept port)", p)
	}
	if tok, ok := defaults["monky_deployd_download_token"]; !ok || tok != "" {
		t.Errorf("monky_deployd_download_token must default to empty (vaulted per inventory), got %v", tok)
	}

	var tasks []map[string]any
	b, _ = os.ReadFile(filepath.Join(role, "tasks", "main.yml"))
	if err := yaml.Unmarshal(b, &tasks); err != nil {
		t.Fatal(err)
	}
	// a task holding a secret hides its output; one holding none never does, so a failure says why
	secretTasks := 0
	for _, task := range tasks {
		body, _ := yaml.Marshal(task)
		token := strings.Contains(string(body), "monky_deployd_download_token")
		grant := strings.Contains(string(body), "monky_deployd_bootstrap_grant }}")
		switch {
		case grant:
			secretTasks++
			if task["no_log"] != true {
				t.Errorf("task %q stages the grant without no_log: true", task["name"])
			}
		case token:
			secretTasks++
			if task["no_log"] != "{{ monky_deployd_download_token | length > 0 }}" {
				t.Errorf("task %q: no_log %v, want it exactly when the token is set", task["name"], task["no_log"])
			}
		case task["no_log"] != nil:
			t.Errorf("task %q holds no secret and hides its output (no_log %v)", task["name"], task["no_log"])
		}
	}
	if secretTasks != 2 {
		t.Errorf("expected the download and the grant staging to be the secret tasks, found %d", secretTasks)
	}

	tmpl, _ := os.ReadFile(filepath.Join(role, "templates", "config.yaml.j2"))
	if !strings.Contains(string(tmpl), "'port': monky_deployd_tenancy_port | int") || strings.Contains(string(tmpl), "8081") {
		t.Errorf("config.yaml.j2 must take the port from monky_deployd_tenancy_port:\n%s", tmpl)
	}
}

// The role is one ansible-galaxy and ansible-lint accept, for the ansible-core Debian 12 ships
// (2.14), with ansible.builtin modules only (no collection to install); its transport is the
// package's default unless set; the config is checked by the agent before it is written, and the
// timer is enabled only after the docker group is checked.
func TestAnsibleRoleMetaAndModules(t *testing.T) {
	t.Parallel()
	role := filepath.Join(testkit.Root(), "packaging", "ansible", "roles", "monky_deployd")
	var meta struct {
		GalaxyInfo map[string]any `yaml:"galaxy_info"`
		Deps       []any          `yaml:"dependencies"`
	}
	b, err := os.ReadFile(filepath.Join(role, "meta", "main.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &meta); err != nil || meta.GalaxyInfo["role_name"] != "monky_deployd" || meta.GalaxyInfo["min_ansible_version"] != "2.14" {
		t.Errorf("meta/main.yml: %v %v, want min_ansible_version 2.14 (Debian 12's ansible-core)", err, meta.GalaxyInfo)
	}
	if _, err := os.Stat(filepath.Join(role, "requirements.yml")); err == nil {
		t.Errorf("requirements.yml: the role needs no collection")
	}
	var tasks []map[string]any
	raw, _ := os.ReadFile(filepath.Join(role, "tasks", "main.yml"))
	if err := yaml.Unmarshal(raw, &tasks); err != nil {
		t.Fatal(err)
	}
	taskKeys := map[string]bool{"name": true, "when": true, "register": true, "loop": true, "notify": true, "no_log": true,
		"changed_when": true, "check_mode": true, "failed_when": true, "ignore_errors": true}
	var order []string
	for _, task := range tasks {
		for k, v := range task {
			if taskKeys[k] {
				continue
			}
			if !strings.HasPrefix(k, "ansible.builtin.") {
				t.Errorf("task %q uses %s: only ansible.builtin modules", task["name"], k)
			}
			if k == "ansible.builtin.template" {
				if args, _ := v.(map[string]any); args["validate"] != "monky-deployd check config --strict %s" {
					t.Errorf("the config template is not validated with `monky-deployd check config --strict %%s`: %v", args["validate"])
				}
			}
		}
		order = append(order, task["name"].(string))
	}
	// the docker group is checked before the role writes anything: package, config, grant, timer
	dockerCheck := slices.Index(order, "Check for the docker group")
	for i, task := range tasks {
		for k := range task {
			writes := k == "ansible.builtin.copy" || k == "ansible.builtin.template" || k == "ansible.builtin.apt" ||
				k == "ansible.builtin.get_url" || k == "ansible.builtin.systemd" || k == "ansible.builtin.user"
			if writes && (dockerCheck < 0 || i < dockerCheck) {
				t.Errorf("task %q writes before the docker group is checked: %v", task["name"], order)
			}
		}
	}
	if write := slices.IndexFunc(order, func(n string) bool { return strings.HasPrefix(n, "Write config.yaml") }); write < 0 ||
		write > slices.Index(order, "Stage the bootstrap grant (a grant not staged before)") {
		t.Errorf("config.yaml is not written (and checked) before the grant is staged: %v", order)
	}
	if !strings.Contains(string(raw), "monky-deployd version --json") || !strings.Contains(string(raw), "default_transport") {
		t.Errorf("the role must take the package's default transport from `monky-deployd version --json`")
	}
}

// TestAnsibleRoleRendersEveryDocumentedKey: every key of the config has its role variable,
// defaulting to config.example.yaml's value (metrics_path on), and the template renders it;
// monky_deployd_config_extra is merged over them.
func TestAnsibleRoleRendersEveryDocumentedKey(t *testing.T) {
	t.Parallel()
	role := filepath.Join(testkit.Root(), "packaging", "ansible", "roles", "monky_deployd")
	var defaults map[string]any
	b, _ := os.ReadFile(filepath.Join(role, "defaults", "main.yml"))
	if err := yaml.Unmarshal(b, &defaults); err != nil {
		t.Fatal(err)
	}
	var example map[string]any
	b, _ = os.ReadFile(filepath.Join(testkit.Root(), "config.example.yaml"))
	if err := yaml.Unmarshal(b, &example); err != nil {
		t.Fatal(err)
	}
	tmpl, _ := os.ReadFile(filepath.Join(role, "templates", "config.yaml.j2"))
	for _, key := range configKeys(reflect.TypeOf(config.Config{}), "") {
		v := "monky_deployd_" + strings.ReplaceAll(key, ".", "_")
		if key == "transport" {
			v = "monky_deployd_transport_chosen" // the package's default when monky_deployd_transport is empty
		}
		if !strings.Contains(string(tmpl), "'"+key[strings.LastIndex(key, ".")+1:]+"': "+v) {
			t.Errorf("config.yaml.j2 does not render %s from %s", key, v)
		}
		def, ok := defaults["monky_deployd_"+strings.ReplaceAll(key, ".", "_")]
		if !ok {
			t.Errorf("defaults/main.yml has no monky_deployd_%s", strings.ReplaceAll(key, ".", "_"))
			continue
		}
		ex, inExample := lookup(example, key)
		switch s, _ := def.(string); {
		case strings.Contains(s, "{{"): // derived from other variables, as the agent derives it
		case key == "env_id": // per host: the example's is an example
		case !inExample && (def == "" || def == nil): // commented out in the example: the agent's default
		case fmt.Sprint(def) != fmt.Sprint(ex):
			t.Errorf("monky_deployd_%s defaults to %v, config.example.yaml has %v", strings.ReplaceAll(key, ".", "_"), def, ex)
		}
	}
	if defaults["monky_deployd_metrics_path"] != "/var/lib/prometheus/node-exporter/monky_deployd.prom" {
		t.Errorf("metrics_path must be on by default: %v", defaults["monky_deployd_metrics_path"])
	}
	if e, ok := defaults["monky_deployd_config_extra"].(map[string]any); !ok || len(e) != 0 {
		t.Errorf("monky_deployd_config_extra must default to an empty mapping: %v", defaults["monky_deployd_config_extra"])
	}
	if !strings.Contains(string(tmpl), "combine(monky_deployd_config_extra, recursive=True)") {
		t.Errorf("config.yaml.j2 does not merge monky_deployd_config_extra over the keys")
	}
}

// configKeys are the config's dotted yaml keys, leaves only.
func configKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		if t.Field(i).Type.Kind() == reflect.Struct {
			out = append(out, configKeys(t.Field(i).Type, prefix+tag+".")...)
			continue
		}
		out = append(out, prefix+tag)
	}
	return out
}

func lookup(m map[string]any, dotted string) (any, bool) {
	head, rest, nested := strings.Cut(dotted, ".")
	v, ok := m[head]
	if !ok || !nested {
		return v, ok
	}
	sub, _ := v.(map[string]any)
	return lookup(sub, rest)
}

// `--check` on a fresh box reports what the role would do instead of failing at the package
// (`No package matching 'monky-deployd'`, or a .deb check mode never downloaded): the installs
// tolerate apt's answer in check mode only, reading the package's transports fails only outside
// check mode, a box where that read got no answer says what a real run does (the config.yaml it
// would write included), and every task after it, which needs the package, is skipped there.
func TestAnsibleRoleCheckModeOnAFreshBox(t *testing.T) {
	t.Parallel()
	role := filepath.Join(testkit.Root(), "packaging", "ansible", "roles", "monky_deployd")
	var tasks []map[string]any
	raw, _ := os.ReadFile(filepath.Join(role, "tasks", "main.yml"))
	if err := yaml.Unmarshal(raw, &tasks); err != nil {
		t.Fatal(err)
	}
	const pending = "not monky_deployd_pending | bool"
	say := -1
	for i, task := range tasks {
		name, _ := task["name"].(string)
		if args, ok := task["ansible.builtin.apt"].(map[string]any); ok && (args["deb"] != nil || strings.HasPrefix(fmt.Sprint(args["name"]), "monky-deployd=")) {
			if task["ignore_errors"] != "{{ ansible_check_mode }}" {
				t.Errorf("task %q: ignore_errors %v, want it in check mode only", name, task["ignore_errors"])
			}
		} else if task["ignore_errors"] != nil {
			t.Errorf("task %q ignores errors: only the package's installs may, in check mode", name)
		}
		if cmd, _ := task["ansible.builtin.command"].(string); cmd == "monky-deployd version --json" &&
			task["failed_when"] != "monky_deployd_build.rc != 0 and not ansible_check_mode" {
			t.Errorf("task %q: failed_when %v, want a failure outside check mode", name, task["failed_when"])
		}
		if strings.HasPrefix(name, "Say what a real run would do") {
			say = i
			if task["when"] != "monky_deployd_pending | bool" {
				t.Errorf("task %q: when %v", name, task["when"])
			}
			continue
		}
		if say < 0 {
			continue
		}
		first := task["when"]
		if l, ok := first.([]any); ok && len(l) > 0 {
			first = l[0]
		}
		if first != pending {
			t.Errorf("task %q comes after the package is read and does not start its when with %q: %v", name, pending, task["when"])
		}
	}
	if say < 0 {
		t.Fatal("no task says what a real run would do when --check finds no package")
	}

	// the role itself, in check mode against this machine, when it is a fresh box with a docker
	// group (two ansible-playbook runs: not with -short; make packaging-test runs it)
	if testing.Short() {
		t.Skip("-short: the role's --check run is left to make packaging-test")
	}
	playbook := needTool(t, "ansible-playbook", "ansible-core")
	if _, err := exec.LookPath("monky-deployd"); err == nil {
		t.Skip("monky-deployd is installed here: not a fresh box")
	}
	if exec.Command("getent", "group", "docker").Run() != nil {
		t.Skip("no docker group here: the role stops before the package")
	}
	dir := t.TempDir()
	deb := filepath.Join(dir, "monky-deployd_1.0.0_amd64.deb")
	testkit.WriteFile(t, deb, "not a package", 0o644)
	testkit.WriteFile(t, filepath.Join(dir, "site.yml"), "- name: A fresh box\n  hosts: localhost\n  gather_facts: false\n  roles: [monky_deployd]\n", 0o644)
	for _, from := range [][]string{
		{"monky_deployd_install_from=apt", "No package matching 'monky-deployd'"},
		{"monky_deployd_install_from=deb monky_deployd_deb_src=" + deb, "/var/cache/monky-deployd_1.0.0_amd64.deb"},
	} {
		cmd := exec.Command(playbook, "-i", "localhost,", "-c", "local", "--check", "--diff", "site.yml",
			"-e", "monky_deployd_env_id=env-qa-02 monky_deployd_transport=proxy "+from[0])
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "ANSIBLE_ROLES_PATH="+filepath.Dir(role), "ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"),
			"ANSIBLE_REMOTE_TEMP="+filepath.Join(dir, "tmp"), "ANSIBLE_NOCOLOR=1", "ANSIBLE_RETRY_FILES_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: ansible-playbook --check failed: %v\n%s", from[0], err, out)
			continue
		}
		for _, w := range []string{"A real run installs monky-deployd 1.0.0", from[1], "transport: proxy", "env_id: env-qa-02", "failed=0"} {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: --check does not say %q:\n%s", from[0], w, out)
			}
		}
	}
}
