package packaging

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

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
	if p, ok := defaults["monky_deployd_tenancy_port"].(int); !ok || p != 443 {
		t.Errorf("monky_deployd_tenancy_port = %v, want 443", defaults["monky_deployd_tenancy_port"])
	}
	if tok, ok := defaults["monky_deployd_download_token"]; !ok || tok != "" {
		t.Errorf("monky_deployd_download_token must default to empty (vaulted per inventory), got %v", tok)
	}

	var tasks []map[string]any
	b, _ = os.ReadFile(filepath.Join(role, "tasks", "main.yml"))
	if err := yaml.Unmarshal(b, &tasks); err != nil {
		t.Fatal(err)
	}
	secretTasks := 0
	for _, task := range tasks {
		body, _ := yaml.Marshal(task)
		if strings.Contains(string(body), "monky_deployd_download_token") || strings.Contains(string(body), "monky_deployd_bootstrap_grant }}") {
			secretTasks++
			if task["no_log"] != true {
				t.Errorf("task %q uses a secret without no_log: true", task["name"])
			}
		}
	}
	if secretTasks < 3 {
		t.Errorf("expected the two downloads and the grant staging to be secret tasks, found %d", secretTasks)
	}

	tmpl, _ := os.ReadFile(filepath.Join(role, "templates", "config.yaml.j2"))
	if !strings.Contains(string(tmpl), "port: {{ monky_deployd_tenancy_port }}") || strings.Contains(string(tmpl), "8081") {
		t.Errorf("config.yaml.j2 must take the port from monky_deployd_tenancy_port:\n%s", tmpl)
	}
}

// The role is a role ansible-galaxy and ansible-lint accept: meta/main.yml, the collections it
// uses in requirements.yml; its transport is the package's default unless set, and the config's
// transport, metrics_path and log_level come from role variables.
func TestAnsibleRoleMetaAndVariables(t *testing.T) {
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
	if err := yaml.Unmarshal(b, &meta); err != nil || meta.GalaxyInfo["role_name"] != "monky_deployd" || meta.GalaxyInfo["min_ansible_version"] == nil {
		t.Errorf("meta/main.yml: %v %v", err, meta.GalaxyInfo)
	}
	var req struct {
		Collections []struct {
			Name string `yaml:"name"`
		} `yaml:"collections"`
	}
	b, err = os.ReadFile(filepath.Join(role, "requirements.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	tasks, _ := os.ReadFile(filepath.Join(role, "tasks", "main.yml"))
	for _, c := range []string{"ansible.posix"} {
		found := false
		for _, r := range req.Collections {
			found = found || r.Name == c
		}
		if strings.Contains(string(tasks), c+".") && !found {
			t.Errorf("tasks use %s, requirements.yml does not list it", c)
		}
	}
	var defaults map[string]any
	b, _ = os.ReadFile(filepath.Join(role, "defaults", "main.yml"))
	if err := yaml.Unmarshal(b, &defaults); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"monky_deployd_transport": "", "monky_deployd_metrics_path": "", "monky_deployd_log_level": "INFO"} {
		if v, ok := defaults[k]; !ok || v != want {
			t.Errorf("defaults %s = %v, want %q", k, v, want)
		}
	}
	if !strings.Contains(string(tasks), "monky-deployd version --json") || !strings.Contains(string(tasks), "default_transport") {
		t.Errorf("the role must take the package's default transport from `monky-deployd version --json`")
	}
	tmpl, _ := os.ReadFile(filepath.Join(role, "templates", "config.yaml.j2"))
	for _, w := range []string{"transport: {{ monky_deployd_transport_chosen }}", "log_level: {{ monky_deployd_log_level", "metrics_path: {{ monky_deployd_metrics_path }}"} {
		if !strings.Contains(string(tmpl), w) {
			t.Errorf("config.yaml.j2 lacks %q", w)
		}
	}
}
