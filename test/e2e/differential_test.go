package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tikali/monky-deployd/effects/docker"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/bundlecheck"
	"github.com/tikali/monky-deployd/internal/model"
	"github.com/tikali/monky-deployd/internal/testkit"
)

// TestDifferentialCheckedModelIsWhatComposeRuns: for every case of the hostile-compose corpus
// (testdata/compose) and every bundle of testdata/bundles that the checks accept, the model the
// policy decided on — loaded by the stage's own functions from the release's files and its
// rendered .env, no process environment — is the model the real compose plugin reads from what
// the agent hands it: the resolved file, the empty --env-file, the release as project directory.
// (The policy decided on more: services of a profile compose is not asked for, and what only
// they use, are checked too; neither is handed to compose.)
//
// The resolved model is a fixed point (AGENT.md's amendments of 2026-12-02): `docker compose
// config` of the resolved file prints the checked model as the agent prints it (model.Printed;
// compared as YAML, since the plugin prints with its own compose-go release, whose field order
// may differ), and prints the same bytes in the environment the agent sets and in a hostile one:
// a random HOME and PATH, DOCKER_* and COMPOSE_* variables, every variable the bundle names set
// to another value, another working directory holding a `.env` and a compose file, and a `.env`
// and a compose.override.yaml beside the resolved file.
func TestDifferentialCheckedModelIsWhatComposeRuns(t *testing.T) {
	type corpusCase struct {
		name    string
		archive []byte
	}
	var cases []corpusCase
	paths, err := filepath.Glob("../../testdata/compose/*.txt")
	if err != nil || len(paths) < 30 {
		t.Fatalf("corpus: %d cases, %v", len(paths), err)
	}
	const env = "env-qa-02"
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		secs := testkit.Sections(string(raw))
		secs = testkit.CaseRelease(secs, env)
		src := filepath.Join(t.TempDir(), "bundle")
		writeFiles(t, src, secs)
		archive, err := bundlecheck.Pack(src)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, corpusCase{strings.TrimSuffix(filepath.Base(p), ".txt"), archive})
	}
	bundles, err := filepath.Glob("../../testdata/bundles/*.tar*")
	if err != nil || len(bundles) == 0 {
		t.Fatalf("testdata/bundles: %d bundles, %v", len(bundles), err)
	}
	for _, p := range bundles {
		archive, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, corpusCase{"bundles/" + filepath.Base(p), archive})
	}
	compared := 0
	for _, c := range cases {
		if res := bundlecheck.Run(c.archive, bundlecheck.Options{}); len(res.Findings) > 0 {
			continue // refused before the lease: nothing of it runs
		}
		t.Run(c.name, func(t *testing.T) { fixedPoint(t, c.archive) })
		compared++
	}
	if compared < 10 {
		t.Errorf("%d accepted cases compared: the corpus has more", compared)
	}
}

// fixedPoint stages archive as the agent does and compares what compose prints for its resolved
// model, in the agent's environment and in a hostile one, with the checked model.
func fixedPoint(t *testing.T, archive []byte) {
	b, err := bundle.Read(archive, bundle.DefaultMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	project := "monky-" + b.Meta.EnvID
	dir := t.TempDir()
	// the release as the stage writes it: the bundle's files and .env, each secret a value
	// of its own
	rel := filepath.Join(dir, "deploy", "releases", b.Sha)
	files := map[string]string{}
	for n, body := range b.Files {
		files[n] = string(body)
	}
	for _, d := range b.Dirs {
		if err := os.MkdirAll(filepath.Join(rel, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFiles(t, rel, files)
	refs := bundle.References(b.Files[bundle.TemplateFile])
	values := map[string]string{}
	for _, n := range refs {
		values[n] = "secret-" + strings.ToLower(n) + "-$x"
	}
	dotenv, err := bundle.Render(b.Files[bundle.TemplateFile], values)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rel, ".env"), dotenv, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := docker.VerifyRelease("stage", rel); err != nil {
		t.Fatal(err)
	}
	cf := b.Meta.ComposeFile
	pr, err := model.Load(context.Background(), rel, cf, b.Files[cf], dotenv, project)
	if err != nil {
		t.Fatal(err)
	}
	if f := model.CheckModel(pr, rel, b.Meta.Agent.AllowPrivileged); len(f) > 0 {
		t.Fatalf("accepted before the lease, refused on the model compose runs: %v", f)
	}
	resolved, err := model.Resolve(pr)
	if err != nil {
		t.Fatal(err)
	}
	want, err := model.Printed(pr)
	if err != nil {
		t.Fatal(err)
	}
	modelPath, emptyEnv := model.ModelPath(rel), model.EmptyEnvPath(rel)
	writeFiles(t, filepath.Dir(modelPath), map[string]string{filepath.Base(modelPath): string(resolved), filepath.Base(emptyEnv): ""})
	args := []string{"compose", "-f", modelPath, "--env-file", emptyEnv, "--project-directory", rel, "-p", project, "config"}

	// the agent's environment, plus what docker and its plugins add at run time
	agentEnv := []string{"PATH=" + docker.SystemPath, "HOME=" + privateCfg, "DOCKER_CONFIG=" + privateCfg,
		"COMPOSE_INTERACTIVE_NO_CLI=1", "PWD=/"}
	out := composeIn(t, rel, agentEnv, args)
	var checked, ran map[string]any
	if err := yaml.Unmarshal(want, &checked); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(out), &ran); err != nil {
		t.Fatalf("compose config printed no YAML: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(checked, ran) {
		t.Errorf("compose runs another model than the one checked\n--- checked (as the agent prints it)\n%s\n--- compose config\n%s", want, out)
	}

	// a hostile environment and working directory
	hostile := t.TempDir()
	cfg := filepath.Join(hostile, "docker-cfg-"+runID)
	if err := linkPlugin(cfg, pluginNew); err != nil {
		t.Fatal(err)
	}
	evil := "services:\n  evil:\n    image: evil\n    privileged: true\n"
	names := append([]string{"HOME", "PATH", "PWD", "TAG", "A", "NOT_SET", "DATA", "DATA_DIR", "ROLE"}, refs...)
	var dotHostile strings.Builder
	dotHostile.WriteString("COMPOSE_FILE=evil.yaml\nCOMPOSE_PROFILES=debug\nCOMPOSE_PROJECT_NAME=evil\n")
	for _, n := range names {
		dotHostile.WriteString(n + "=/evil-" + strings.ToLower(n) + "\n")
	}
	writeFiles(t, hostile, map[string]string{".env": dotHostile.String(), "evil.yaml": evil, "compose.yaml": evil})
	writeFiles(t, filepath.Dir(modelPath), map[string]string{".env": dotHostile.String(), "compose.override.yaml": evil})
	henv := []string{
		"HOME=" + filepath.Join(hostile, "home-"+runID),
		"PATH=" + filepath.Join(hostile, "bin-"+runID) + ":" + docker.SystemPath,
		"PWD=" + hostile,
		"DOCKER_CONFIG=" + cfg,
		"DOCKER_CERT_PATH=" + filepath.Join(hostile, "certs"),
		"DOCKER_DEFAULT_PLATFORM=linux/s390x",
		"DOCKER_BUILDKIT=0",
		"COMPOSE_FILE=" + filepath.Join(hostile, "evil.yaml"),
		"COMPOSE_PROFILES=debug,evil",
		"COMPOSE_PROJECT_NAME=evil",
		"COMPOSE_ENV_FILES=" + filepath.Join(hostile, ".env"),
		"COMPOSE_PATH_SEPARATOR=;",
		"COMPOSE_CONVERT_WINDOWS_PATHS=1",
		"COMPOSE_REMOVE_ORPHANS=1",
		"COMPOSE_INTERACTIVE_NO_CLI=1",
	}
	for _, n := range names {
		if n != "HOME" && n != "PATH" && n != "PWD" {
			henv = append(henv, n+"=/evil-"+strings.ToLower(n))
		}
	}
	if got := composeIn(t, hostile, henv, args); got != out {
		t.Errorf("in a hostile environment compose reads another model\n--- in the agent's environment\n%s\n--- in a hostile one\n%s", out, got)
	}
}

// composeIn runs the docker CLI with args in dir with exactly env, and returns its output.
func composeIn(t *testing.T, dir string, env, args []string) string {
	t.Helper()
	cmd := exec.Command(dockerBin, args...)
	cmd.Dir, cmd.Env = dir, env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, e.String())
	}
	return o.String()
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for n, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
