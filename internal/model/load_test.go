package model

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// writeRelease writes files and their .env into a new release directory and returns it.
func writeRelease(t *testing.T, files map[string]string, env string) string {
	t.Helper()
	rel := filepath.Join(t.TempDir(), "releases", strings.Repeat("a", 64))
	files[".env"] = env
	for n, b := range files {
		p := filepath.Join(rel, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return rel
}

// TestResolvedModelIsAFixedPoint: the model written for compose, loaded again as compose loads
// it under another environment (variables docker and its plugins add, ones the bundle names),
// is the same model byte for byte: nothing in it is left to interpolate, every path is
// absolute, every literal `$` survives.
func TestResolvedModelIsAFixedPoint(t *testing.T) {
	rel := writeRelease(t, map[string]string{
		"compose.yaml": `include: [more.yaml]
x-common: &common
  image: harbor.tikali.net/monky/api:${TAG:-1}
services:
  api:
    <<: *common
    env_file: .env
    command: ["sh", "-c", "echo $$HOME ${NOT_SET:-dflt} $${LITERAL}"]
    volumes:
      - ./${COMPOSE_INTERACTIVE_NO_CLI:+../../..}:/host:ro
      - ${DOCKER_CONFIG:-./data}:/d
      - data:/var/lib/data
  worker:
    extends: {file: base.yaml, service: base}
volumes:
  data: {}
`,
		"more.yaml": "services:\n  more:\n    image: more:${TAG:-1}\n",
		"base.yaml": "services:\n  base:\n    image: base:1\n    environment: {A: \"${A:-x}$$y\"}\n",
	}, "TAG=7\nSECRET=\"s3cr$$et\"\n")
	ctx := context.Background()
	raw, _ := os.ReadFile(filepath.Join(rel, "compose.yaml"))
	p, err := Load(ctx, rel, "compose.yaml", raw, []byte("TAG=7\nSECRET=\"s3cr$$et\"\n"), "monky-env-qa-02")
	if err != nil {
		t.Fatal(err)
	}
	first, err := Resolve(p)
	if err != nil {
		t.Fatal(err)
	}
	hostile := []byte("COMPOSE_INTERACTIVE_NO_CLI=1\nDOCKER_CONFIG=/root/.docker\nPWD=/\nTAG=evil\nA=evil\nNOT_SET=evil\nHOME=/root\n")
	again, err := Load(ctx, rel, "resolved.yaml", first, hostile, "monky-env-qa-02")
	if err != nil {
		t.Fatal(err)
	}
	second, err := Resolve(again)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Errorf("the resolved model loaded again is another model\n--- first\n%s\n--- again\n%s", first, second)
	}
	for _, want := range []string{"api:7", "more:7", "base:1", "$$HOME", "dflt", "$${LITERAL}", "A: x$$y", "SECRET: s3cr$$et", "source: " + rel + "\n"} {
		if !bytes.Contains(first, []byte(want)) {
			t.Errorf("the model lacks %q:\n%s", want, first)
		}
	}
}

// TestResolveKeepsMeaning: values are escaped and keys are not, a service that joins no network
// (`network_mode: ""`) joins none when the model is loaded again, and a model that would not
// load again as itself — an environment entry compose fills from its own environment, a key
// holding `$` — is refused naming the service. (An env_file line without a value is dropped
// when the env_file is folded in: the model takes nothing from any environment.)
func TestResolveKeepsMeaning(t *testing.T) {
	ctx := context.Background()
	load := func(t *testing.T, files map[string]string) *types.Project {
		t.Helper()
		rel := writeRelease(t, map[string]string{"compose.yaml": "services:\n  x:\n    image: x\n"}, "")
		for n, body := range files {
			if err := os.WriteFile(filepath.Join(rel, n), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		p, err := Load(ctx, rel, "compose.yaml", []byte(files["compose.yaml"]), nil, "monky-env-qa-02")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := load(t, map[string]string{"compose.yaml": `services:
  api:
    image: x
    labels: {cost: "$$1"}
  solo:
    image: x
    network_mode: ""
`})
	model, err := Resolve(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cost: $$1", `network_mode: ""`} {
		if !bytes.Contains(model, []byte(want)) {
			t.Errorf("the model lacks %q:\n%s", want, model)
		}
	}
	again := load(t, map[string]string{"compose.yaml": string(model)})
	if n := again.Services["solo"].Networks; len(n) != 0 {
		t.Errorf("loaded again, the service that joins no network joins %v:\n%s", n, model)
	}
	if l := again.Services["api"].Labels["cost"]; l != "$1" {
		t.Errorf("loaded again, the label is %q, want $1", l)
	}

	for name, c := range map[string]struct{ files map[string]string }{
		"environment without a value": {map[string]string{"compose.yaml": "services:\n  api:\n    image: x\n    environment: [HOME]\n"}},
		"label key holding $":         {map[string]string{"compose.yaml": "services:\n  api:\n    image: x\n    labels: {\"k$$x\": v}\n"}},
	} {
		t.Run(name, func(t *testing.T) {
			p := load(t, c.files)
			model, err := Resolve(p)
			if err == nil {
				t.Fatalf("resolved:\n%s", model)
			}
			if !strings.Contains(err.Error(), "service api: ") {
				t.Errorf("%v does not name the service", err)
			}
		})
	}
}
