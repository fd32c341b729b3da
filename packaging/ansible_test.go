package packaging

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Every YAML file of the role parses; the tenancy port is 443 (DD-0523: the role still said 8081
// after install.sh moved to 443); every task that touches the download token or the grant is no_log.
func TestAnsibleRole(t *testing.T) {
	t.Parallel()
	role := filepath.Join(repoRoot(t), "packaging", "ansible", "roles", "monky_deployd")
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
