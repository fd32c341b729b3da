package packaging

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// The package's relations bring what the agent needs and nothing else: compose v2 by the names
// the distributions give it, never compose v1 (`docker-compose` is 1.29 on Debian 12 and pulls
// docker.io, containerd and runc), and no engine unless the operator chooses one.
func TestDependenciesBringNoEngineAndNoComposeV1(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testkit.Root(), "packaging", "nfpm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Depends    []string `yaml:"depends"`
		Recommends []string `yaml:"recommends"`
		Suggests   []string `yaml:"suggests"`
	}
	if err := yaml.Unmarshal(b, &pkg); err != nil {
		t.Fatal(err)
	}
	names := func(rels []string) []string {
		var out []string
		for _, r := range rels {
			for _, alt := range strings.Split(r, "|") {
				out = append(out, strings.Fields(alt)[0])
			}
		}
		return out
	}
	pulled := names(append(slices.Clone(pkg.Depends), pkg.Recommends...))
	for _, never := range []string{"docker-compose", "docker.io", "docker-ce", "containerd", "containerd.io", "runc"} {
		if slices.Contains(pulled, never) {
			t.Errorf("Depends/Recommends name %s: apt would install it unasked (%v, %v)", never, pkg.Depends, pkg.Recommends)
		}
	}
	if !slices.Contains(pkg.Recommends, "docker-compose-plugin | docker-compose-v2") {
		t.Errorf("Recommends %v: want compose v2 as docker-compose-plugin | docker-compose-v2", pkg.Recommends)
	}
	if !slices.Contains(names(pkg.Suggests), "docker-ce") || !slices.Contains(names(pkg.Suggests), "docker.io") {
		t.Errorf("Suggests %v: the engines are the operator's choice", pkg.Suggests)
	}
}
