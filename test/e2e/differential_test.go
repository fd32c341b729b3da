package e2e

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tikali/monky-deployd/effects/docker"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/bundlecheck"
	"github.com/tikali/monky-deployd/internal/testkit"
)

// TestDifferentialCheckedModelIsWhatComposeRuns: for every case of the hostile-compose corpus
// (testdata/compose) that the checks accept, the model the policy decided on — loaded by the
// stage's own functions from the release's files and its rendered .env, no process environment
// — is the model the real compose plugin reads from what the agent hands it: the resolved file,
// the empty --env-file, the release as project directory, in the environment the agent sets
// (plus variables that used to change what compose resolved). `docker compose config` of that
// must print the same model. (The policy decided on more: services of a profile compose is not
// asked for, and what only they use, are checked too; neither is handed to compose.)
func TestDifferentialCheckedModelIsWhatComposeRuns(t *testing.T) {
	paths, err := filepath.Glob("../../testdata/compose/*.txt")
	if err != nil || len(paths) < 30 {
		t.Fatalf("corpus: %d cases, %v", len(paths), err)
	}
	const env, project = "env-qa-02", "monky-env-qa-02"
	compared := 0
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".txt")
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		secs := corpusSections(string(raw))
		delete(secs, "want")
		delete(secs, "agent-env")
		var names []string
		for n := range secs {
			if n != bundle.MetaFile {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		if _, ok := secs[bundle.MetaFile]; !ok {
			secs[bundle.MetaFile] = testkit.BundleMeta(env, nil, names...)
		}
		dir := t.TempDir()
		src := filepath.Join(dir, "bundle")
		writeFiles(t, src, secs)
		archive, err := bundlecheck.Pack(src)
		if err != nil {
			t.Fatal(err)
		}
		if res := bundlecheck.Run(archive, bundlecheck.Options{EnvID: env}); len(res.Findings) > 0 {
			continue // refused before the lease: nothing of it runs
		}
		t.Run(name, func(t *testing.T) {
			b, err := bundle.Read(archive, bundle.DefaultMaxBytes)
			if err != nil {
				t.Fatal(err)
			}
			// the release as the stage writes it: the bundle's files and .env, each secret a
			// value of its own
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
			values := map[string]string{}
			for _, n := range bundle.References(b.Files[bundle.TemplateFile]) {
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
			pr, err := docker.Load(context.Background(), rel, cf, b.Files[cf], dotenv, project)
			if err != nil {
				t.Fatal(err)
			}
			if f := bundle.CheckModel(pr, rel, b.Meta.Agent.AllowPrivileged); len(f) > 0 {
				t.Fatalf("accepted before the lease, refused on the model compose runs: %v", f)
			}
			model, err := docker.Resolve(pr)
			if err != nil {
				t.Fatal(err)
			}
			modelPath, emptyEnv := docker.ModelPath(rel), docker.EmptyEnvPath(rel)
			writeFiles(t, filepath.Dir(modelPath), map[string]string{filepath.Base(modelPath): string(model), filepath.Base(emptyEnv): ""})

			// what compose prints for what the agent hands it, in the agent's environment
			// plus what docker and its plugins add at run time
			out, err := runCmd(rel, nil, "env", "-i", "PATH="+docker.SystemPath, "HOME="+privateCfg, "DOCKER_CONFIG="+privateCfg,
				"COMPOSE_INTERACTIVE_NO_CLI=1", "PWD=/", "COMPOSE_PROFILES=debug", "COMPOSE_FILE=evil.yaml",
				dockerBin, "compose", "-f", modelPath, "--env-file", emptyEnv, "--project-directory", rel, "-p", project, "config")
			if err != nil {
				t.Fatalf("compose config: %v", err)
			}
			var checked, ran map[string]any
			if err := yaml.Unmarshal(model, &checked); err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal([]byte(out), &ran); err != nil {
				t.Fatalf("compose config printed no YAML: %v\n%s", err, out)
			}
			if !reflect.DeepEqual(checked, ran) {
				t.Errorf("compose runs another model than the one checked\n--- checked (handed to compose)\n%s\n--- compose config\n%s", model, out)
			}
		})
		compared++
	}
	if compared < 5 {
		t.Errorf("%d accepted cases compared: the corpus has more", compared)
	}
}

func corpusSections(raw string) map[string]string {
	out := map[string]string{}
	cur := ""
	for _, line := range strings.SplitAfter(raw, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "-- ") && strings.HasSuffix(l, " --") {
			cur = strings.TrimSuffix(strings.TrimPrefix(l, "-- "), " --")
			out[cur] = ""
			continue
		}
		if cur != "" {
			out[cur] += line
		}
	}
	return out
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
