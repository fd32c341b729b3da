package docker

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/model"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/internal/vocab"
)

func TestMain(m *testing.M) { testkit.Main(m) }

type fixture struct {
	cli      *CLI
	state    string
	log      string
	release  string
	dockerCf string
}

const compose = `services:
  api:
    image: harbor.tikali.net/monky/api:1
    healthcheck:
      test: ["CMD", "true"]
  worker:
    image: harbor.tikali.net/monky/worker:1
`

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{state: filepath.Join(root, "state"), log: filepath.Join(root, "calls.jsonl"),
		dockerCf: filepath.Join(root, "agent", "docker")}
	if err := os.MkdirAll(f.state, 0o755); err != nil {
		t.Fatal(err)
	}
	f.release = stageRelease(t, filepath.Join(root, "deploy"), map[string]string{"compose.yaml": compose}, "API_KEY=\"s3cr3t\"\n")
	t.Setenv("FAKE_DOCKER_STATE", f.state)
	t.Setenv("FAKE_DOCKER_LOG", f.log)
	// A human's settings in the agent's environment must not leak into docker's.
	t.Setenv("DOCKER_CONFIG", "/home/someone/.docker")
	t.Setenv("COMPOSE_INTERACTIVE_NO_CLI", "0")
	f.cli = New(testkit.FakeDockerFor(t, f.log, f.state), "monky-env-qa-02", f.dockerCf)
	return f
}

// stageRelease writes a release of files (bundle.json added when absent, listing them) and its
// .env under deploy/releases/<sha>, and its resolved model as the stage does; it returns the
// release directory.
func stageRelease(t *testing.T, deploy string, fs map[string]string, env string) string {
	t.Helper()
	all := map[string][]byte{}
	var names []string
	for n, b := range fs {
		all[n] = []byte(b)
		if n != bundle.MetaFile {
			names = append(names, n)
		}
	}
	if _, ok := all[bundle.MetaFile]; !ok {
		list, _ := json.Marshal(names)
		all[bundle.MetaFile] = []byte(`{"env_id": "env-qa-02", "files": ` + string(list) + `}`)
	}
	var m bundle.Meta
	if err := json.Unmarshal(all[bundle.MetaFile], &m); err != nil {
		t.Fatal(err)
	}
	if m.ComposeFile == "" {
		m.ComposeFile = bundle.DefaultComposeFile
	}
	rel := filepath.Join(deploy, "releases", bundle.Sha(all))
	for n, b := range all {
		p := filepath.Join(rel, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(rel, ".env"), []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := model.Load(context.Background(), rel, m.ComposeFile, all[m.ComposeFile], []byte(env), "monky-env-qa-02")
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := model.Resolve(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(model.ModelPath(rel)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model.ModelPath(rel), resolved, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model.EmptyEnvPath(rel), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return rel
}

func (f *fixture) knob(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.state, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// calls are the calls the stub recorded; none fails the test.
func (f *fixture) calls(t *testing.T) []testkit.DockerCall {
	t.Helper()
	c := testkit.DockerCalls(t, f.log)
	if len(c) == 0 {
		t.Fatal("the docker stub recorded no call")
	}
	return c
}

func TestCommandsArgvDirEnv(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.cli.Pull(ctx, f.release); err != nil {
		t.Fatalf("pull: %v", err)
	}
	if err := f.cli.Up(ctx, f.release); err != nil {
		t.Fatalf("up: %v", err)
	}
	if _, err := f.cli.PS(ctx, f.release); err != nil {
		t.Fatalf("ps: %v", err)
	}
	if _, err := f.cli.Logs(ctx, f.release, 50); err != nil {
		t.Fatalf("logs: %v", err)
	}
	if err := f.cli.Down(ctx, f.release, false); err != nil {
		t.Fatalf("down: %v", err)
	}
	if err := f.cli.Down(ctx, f.release, true); err != nil {
		t.Fatalf("down -v: %v", err)
	}
	if _, err := f.cli.DataRoot(ctx); err != nil {
		t.Fatalf("data root: %v", err)
	}
	if err := f.cli.ImagePrune(ctx); err != nil {
		t.Fatalf("prune: %v", err)
	}
	p := []string{"compose", "-f", model.ModelPath(f.release), "--env-file", model.EmptyEnvPath(f.release),
		"--project-directory", f.release, "-p", "monky-env-qa-02"}
	want := [][]string{
		append(p, "pull"),
		append(p, "up", "-d", "--remove-orphans"),
		append(p, "ps", "--all", "--format", "json"),
		append(p, "logs", "--no-color", "--tail", "50"),
		append(p, "down", "--remove-orphans"),
		append(p, "down", "--remove-orphans", "-v"),
		{"info", "-f", "{{.DockerRootDir}}"},
		{"image", "prune", "-f"},
	}
	calls := f.calls(t)
	if len(calls) != len(want) {
		t.Fatalf("%d calls, want %d: %+v", len(calls), len(want), calls)
	}
	for i, c := range calls {
		if !reflect.DeepEqual(c.Argv, want[i]) {
			t.Errorf("call %d argv = %q, want %q", i, c.Argv, want[i])
		}
		if c.DockerConfig != f.dockerCf {
			t.Errorf("call %d DOCKER_CONFIG = %q, want %q", i, c.DockerConfig, f.dockerCf)
		}
		if c.InteractiveNoCLI != "1" {
			t.Errorf("call %d COMPOSE_INTERACTIVE_NO_CLI = %q", i, c.InteractiveNoCLI)
		}
		if i < 6 && c.Dir != f.release {
			t.Errorf("call %d dir = %q, want %q", i, c.Dir, f.release)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(f.state, "volumes-removed")); strings.TrimSpace(string(b)) != "monky-env-qa-02" {
		t.Errorf("volumes removed = %q, want one -v down", b)
	}
}

func TestUpThenPSBothFormats(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if cs, err := f.cli.PS(ctx, f.release); err != nil || len(cs) != 0 {
		t.Fatalf("ps before up = %v, %v", cs, err)
	}
	if err := f.cli.Up(ctx, f.release); err != nil {
		t.Fatal(err)
	}
	want := []effects.Container{
		{Name: "monky-env-qa-02-api-1", Service: "api", State: "running", Health: "healthy", Status: "Up About an hour (healthy)"},
		{Name: "monky-env-qa-02-worker-1", Service: "worker", State: "running", Health: "", Status: "Up About an hour"},
	}
	nd, err := f.cli.PS(ctx, f.release)
	for i := range nd { // the stub's IDs are new at every up: each is there, and is its own
		if len(nd[i].ID) != 64 || i > 0 && nd[i].ID == nd[0].ID {
			t.Errorf("container %s: ID %q", nd[i].Name, nd[i].ID)
		}
		want[i].ID = nd[i].ID
	}
	if err != nil || !reflect.DeepEqual(nd, want) {
		t.Fatalf("ps (NDJSON) = %+v, %v", nd, err)
	}
	f.knob(t, "ps-array", "")
	arr, err := f.cli.PS(ctx, f.release)
	if err != nil || !reflect.DeepEqual(arr, want) {
		t.Fatalf("ps (array) = %+v, %v", arr, err)
	}
	f.knob(t, "unhealthy", "api\n")
	cs, _ := f.cli.PS(ctx, f.release)
	if cs[0].Healthy() || !cs[1].Healthy() {
		t.Errorf("unhealthy knob: %+v", cs)
	}
	if err := f.cli.Down(ctx, f.release, false); err != nil {
		t.Fatal(err)
	}
	if cs, err := f.cli.PS(ctx, f.release); err != nil || len(cs) != 0 {
		t.Errorf("ps after down = %v, %v", cs, err)
	}
}

func TestPullFailureCarriesRegistryWords(t *testing.T) {
	f := newFixture(t)
	f.knob(t, "pull-error", " api Pulling \n\n api Error \nError response from daemon: no basic auth credentials\n")
	err := f.cli.Pull(context.Background(), f.release)
	var e *effects.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %T %v", err, err)
	}
	if e.Code != vocab.ComposePullFailed || e.Kind != effects.Permanent || e.Op != "compose pull" {
		t.Errorf("error = %+v", e)
	}
	if e.Msg != "api Pulling | api Error | Error response from daemon: no basic auth credentials" {
		t.Errorf("msg = %q", e.Msg)
	}
	if !strings.Contains(err.Error(), "no basic auth credentials") {
		t.Errorf("Error() = %q", err.Error())
	}
}

func TestUpFailureAndSilentFailure(t *testing.T) {
	f := newFixture(t)
	f.knob(t, "up-error", "")
	err := f.cli.Up(context.Background(), f.release)
	if effects.CodeOf(err) != vocab.ComposeUpFailed {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "exited 1 and printed nothing") {
		t.Errorf("a silent failure must still say something: %q", err.Error())
	}
}

func TestDownWithoutDir(t *testing.T) {
	f := newFixture(t)
	gone := filepath.Join(t.TempDir(), "releases", "gone")
	if err := f.cli.Down(context.Background(), gone, false); err != nil {
		t.Fatalf("down: %v", err)
	}
	c := f.calls(t)[0]
	if c.Dir == gone || c.Dir == "" {
		t.Errorf("ran in %q", c.Dir)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s left behind", c.Dir)
	}
}

func TestDataRoot(t *testing.T) {
	f := newFixture(t)
	f.knob(t, "root-dir", "/home/docker-data\n")
	got, err := f.cli.DataRoot(context.Background())
	if err != nil || got != "/home/docker-data" {
		t.Errorf("DataRoot = %q, %v", got, err)
	}
}

func TestMissingBinary(t *testing.T) {
	cli := New("monky-no-such-docker", "p", t.TempDir())
	err := cli.Up(context.Background(), stageRelease(t, t.TempDir(), map[string]string{"compose.yaml": compose}, ""))
	if err == nil || !strings.Contains(err.Error(), "monky-no-such-docker not found on PATH") {
		t.Errorf("err = %v", err)
	}
}

func TestTimeoutKillsAndIsTemporary(t *testing.T) {
	f := newFixture(t)
	f.knob(t, "up-sleep", "20")
	f.cli.Timeout = 300 * time.Millisecond
	start := time.Now()
	err := f.cli.Up(context.Background(), f.release)
	if time.Since(start) > 8*time.Second {
		t.Errorf("up took %s after a 300ms timeout", time.Since(start))
	}
	if !effects.IsTemporary(err) || effects.CodeOf(err) != vocab.ComposeUpFailed || !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Errorf("err = %v", err)
	}
}

func TestVersion(t *testing.T) {
	f := newFixture(t)
	v, err := f.cli.Version(context.Background())
	if err != nil || !strings.Contains(v, "29.0.0-fake") || !strings.Contains(v, "v2.40.0-fake") {
		t.Errorf("Version = %q, %v", v, err)
	}
}

func TestMeaningful(t *testing.T) {
	out := "\x1b[1A\x1b[2K api Pulling\r api Pulled\n\n   \nfinal  \n"
	if got := Meaningful([]byte(out)); got != "api Pulled | final" {
		t.Errorf("Meaningful = %q", got)
	}
	long := strings.Repeat("x", 1000) + "\nthe end"
	got := Meaningful([]byte(long))
	if len(got) != MsgMax || !strings.HasSuffix(got, " | the end") {
		t.Errorf("long: len %d, %q…", len(got), got[len(got)-12:])
	}
}

func TestLogsCarryServiceOutput(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.cli.Up(ctx, f.release); err != nil {
		t.Fatal(err)
	}
	f.knob(t, "log-line", "canary hvs.CANARYTOKEN\n")
	out, err := f.cli.Logs(ctx, f.release, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "monky-env-qa-02-api-1  | canary hvs.CANARYTOKEN") || !strings.Contains(out, "starting worker") {
		t.Errorf("logs = %q", out)
	}
	if argv := f.calls(t)[1].Argv; strings.Join(argv[9:], " ") != "logs --no-color --tail 100" {
		t.Errorf("argv = %q: a tail of 0 means the default 100", argv)
	}
}

// TestComposePinned: every compose call runs the resolved model written at stage (through the
// `current` link) with an empty --env-file, in the release's directory, and docker's
// environment is the four names the agent sets — so a compose.override.yaml, COMPOSE_FILE in
// the environment or in .env, or a variable docker or the agent adds change nothing.
func TestComposePinned(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	deploy := filepath.Dir(filepath.Dir(f.release))
	rel := stageRelease(t, deploy, map[string]string{
		"bundle.json": `{"env_id": "env-qa-02", "compose_file": "deploy/app.yaml", "files": ["deploy/app.yaml", "compose.yaml", "compose.override.yaml", "evil.yaml"]}`,
		"deploy/app.yaml": "services:\n  api:\n    image: harbor.tikali.net/monky/api:2\n    environment: [API_KEY]\n" +
			"    volumes:\n      - ./${COMPOSE_INTERACTIVE_NO_CLI:+../../..}:/host\n      - ${DOCKER_CONFIG:-./data}:/d\n      - ${HOME:-./home}:/h\n",
		"compose.yaml":          "services:\n  evil:\n    image: evil\n    privileged: true\n",
		"compose.override.yaml": "services:\n  api:\n    image: evil\n    privileged: true\n",
		"evil.yaml":             "services:\n  evil:\n    image: evil\n    privileged: true\n",
	}, "API_KEY=\"s3cr3t\"\nCOMPOSE_FILE=evil.yaml\n")
	current := filepath.Join(deploy, "current")
	if err := os.Symlink("releases/"+filepath.Base(rel), current); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COMPOSE_FILE", "evil.yaml")
	t.Setenv("COMPOSE_PROFILES", "debug")
	t.Setenv("API_KEY", "from-the-agent-environment")
	if err := f.cli.Up(ctx, current); err != nil {
		t.Fatal(err)
	}
	c := f.calls(t)[0]
	want := []string{"compose", "-f", model.ModelPath(rel), "--env-file", model.EmptyEnvPath(rel),
		"--project-directory", rel, "-p", "monky-env-qa-02", "up", "-d", "--remove-orphans"}
	if !reflect.DeepEqual(c.Argv, want) {
		t.Errorf("argv = %q\nwant   %q", c.Argv, want)
	}
	if c.Dir != rel {
		t.Errorf("dir = %q, want the resolved release %q", c.Dir, rel)
	}
	sort.Strings(c.Env)
	if env := strings.Join(c.Env, " "); env != "COMPOSE_INTERACTIVE_NO_CLI DOCKER_CONFIG HOME PATH" {
		t.Errorf("docker's environment holds %s: the agent sets it whole", env)
	}
	// the file compose was handed: the model, resolved without the agent's environment
	model := c.Files[model.ModelPath(rel)]
	for _, w := range []string{"source: " + rel + "\n", "source: " + filepath.Join(rel, "data") + "\n",
		"source: " + filepath.Join(rel, "home") + "\n", "API_KEY: s3cr3t"} {
		if !strings.Contains(model, w) {
			t.Errorf("the model compose ran lacks %q:\n%s", w, model)
		}
	}
	for _, bad := range []string{"${", "evil", "source: /\n", f.dockerCf, "privileged"} {
		if strings.Contains(model, bad) {
			t.Errorf("the model compose ran holds %q:\n%s", bad, model)
		}
	}
	cs, err := f.cli.PS(ctx, current)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Service != "api" {
		t.Fatalf("ran %+v, want api alone", cs)
	}
	raw, _ := os.ReadFile(filepath.Join(f.state, "projects", "monky-env-qa-02.json"))
	if strings.Contains(string(raw), "evil") || strings.Contains(string(raw), `"Privileged":true`) {
		t.Errorf("the override or COMPOSE_FILE was applied: %s", raw)
	}

	// The release gone: down by the project name alone, loading no file.
	if err := os.RemoveAll(rel); err != nil {
		t.Fatal(err)
	}
	if err := f.cli.Down(ctx, current, false); err != nil {
		t.Fatal(err)
	}
	calls := f.calls(t)
	d := calls[len(calls)-1]
	if len(d.Argv) != 7 || d.Argv[1] != "--project-directory" || d.Argv[2] != d.Dir || d.Argv[4] != "monky-env-qa-02" || d.Argv[5] != "down" {
		t.Errorf("down without a release: argv %q in %q", d.Argv, d.Dir)
	}
}

// TestReleaseChangedRunsNoCompose: between ticks a container (or a person) plants a symlink in
// the release, rewrites its compose file, or replaces the model: the next compose call fails
// with RELEASE_CHANGED naming the path and docker is not run; a down runs by project name.
func TestReleaseChangedRunsNoCompose(t *testing.T) {
	cases := []struct {
		name, want string
		change     func(t *testing.T, rel string)
	}{
		{"symlink planted in a bound directory", "data/etc is a symlink (→ /etc)", func(t *testing.T, rel string) {
			os.MkdirAll(filepath.Join(rel, "data"), 0o755)
			if err := os.Symlink("/etc", filepath.Join(rel, "data", "etc")); err != nil {
				t.Fatal(err)
			}
		}},
		{"compose file rewritten", "its files hash to", func(t *testing.T, rel string) {
			if err := os.WriteFile(filepath.Join(rel, "compose.yaml"), []byte("services:\n  api:\n    image: x\n    privileged: true\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"compose file replaced by a symlink", "compose.yaml: is a symlink", func(t *testing.T, rel string) {
			os.Rename(filepath.Join(rel, "compose.yaml"), filepath.Join(rel, "c.yaml"))
			if err := os.Symlink("c.yaml", filepath.Join(rel, "compose.yaml")); err != nil {
				t.Fatal(err)
			}
		}},
		{"model a symlink", "is a symlink", func(t *testing.T, rel string) {
			other := filepath.Join(t.TempDir(), "m.yaml")
			os.WriteFile(other, []byte("services: {}\n"), 0o600)
			os.Remove(model.ModelPath(rel))
			if err := os.Symlink(other, model.ModelPath(rel)); err != nil {
				t.Fatal(err)
			}
		}},
		{"env file not empty", "is not empty", func(t *testing.T, rel string) {
			if err := os.WriteFile(model.EmptyEnvPath(rel), []byte("COMPOSE_PROFILES=x\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if err := f.cli.Up(ctx, f.release); err != nil {
				t.Fatal(err)
			}
			tc.change(t, f.release)
			for _, call := range []func() error{
				func() error { return f.cli.Pull(ctx, f.release) },
				func() error { return f.cli.Up(ctx, f.release) },
				func() error { _, err := f.cli.PS(ctx, f.release); return err },
				func() error { _, err := f.cli.Logs(ctx, f.release, 5); return err },
			} {
				err := call()
				if effects.CodeOf(err) != vocab.ReleaseChanged || effects.IsTemporary(err) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("err = %v, want %s naming %q", err, vocab.ReleaseChanged, tc.want)
				}
			}
			if n := len(f.calls(t)); n != 1 {
				t.Errorf("docker ran %d times, want the first up alone", n)
			}
			if err := f.cli.Down(ctx, f.release, false); err != nil {
				t.Fatal(err)
			}
			calls := f.calls(t)
			if d := calls[len(calls)-1]; len(d.Files) != 0 || !d.Has("-p", "monky-env-qa-02", "down") {
				t.Errorf("down of a changed release: %q loads %d file(s)", d.Argv, len(d.Files))
			}
		})
	}
}

// TestReleaseWithoutModel: a release staged before the agent wrote models (an upgrade) is
// never pulled or started; ps and logs look at it by project name alone, loading no file.
func TestReleaseWithoutModel(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := os.Remove(model.ModelPath(f.release)); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{f.cli.Pull(ctx, f.release), f.cli.Up(ctx, f.release)} {
		if effects.CodeOf(err) != vocab.ReleaseChanged || !strings.Contains(err.Error(), "no resolved model") {
			t.Errorf("err = %v", err)
		}
	}
	if _, err := f.cli.PS(ctx, f.release); err != nil {
		t.Fatal(err)
	}
	calls := f.calls(t)
	if len(calls) != 1 || len(calls[0].Files) != 0 || !calls[0].Has("-p", "monky-env-qa-02", "ps") || calls[0].Has("-f") {
		t.Errorf("calls %+v, want one ps by project name", calls)
	}
}

// A secret that the MsgMax window cuts leaves no tail in clear: it is masked before the cut.
// Cut first, the window began inside the secret and its tail no longer matched it.
func TestMeaningfulMasksBeforeTheCut(t *testing.T) {
	secret := "canary-window-S3cr3t-tail-Qz8"
	redact.Add(secret)
	for shift := 0; shift < len(secret); shift++ {
		// the window's first byte falls at byte shift of the secret
		out := strings.Repeat("a", 100) + "\n" + secret + strings.Repeat("b", MsgMax-len(secret)+shift) + "\n"
		got := Meaningful([]byte(out))
		if len(got) > MsgMax {
			t.Fatalf("%d bytes", len(got))
		}
		for k := 4; k <= len(secret); k++ {
			if strings.Contains(got, secret[len(secret)-k:]) {
				t.Fatalf("shift %d: the secret's last %d bytes in clear: %q…", shift, k, got[:40])
			}
		}
	}
}

// Ready: compose v2 answers; no CLI, no compose plugin and compose v1 are DOCKER_NOT_FOUND with
// the fix, permanent (a retry cannot help); the one engine call is `docker info`, and an engine
// that does not answer is DOCKER_ENGINE_DOWN, temporary.
func TestReady(t *testing.T) {
	f := newFixture(t)
	f.cli.Socket = filepath.Join(t.TempDir(), "none.sock") // no socket to check here
	if err := f.cli.Ready(context.Background()); err != nil {
		t.Fatalf("compose v2: %v", err)
	}
	cases := []struct{ knob, want string }{
		{"error: docker: 'compose' is not a docker command.", "has no compose v2 plugin: docker: 'compose' is not a docker command."},
		{"docker-compose version 1.29.2, build unknown\n", "compose v2 or later is needed"},
		{"Docker Compose version v1.0.0-beta\n", "compose v2 or later is needed"},
	}
	for _, c := range cases {
		f.knob(t, "compose-version", c.knob)
		err := f.cli.Ready(context.Background())
		var e *effects.Error
		if !errors.As(err, &e) || e.Code != vocab.DockerNotFound || e.Kind != effects.Permanent ||
			!strings.Contains(e.Msg, c.want) || !strings.Contains(e.Hint, "docker-compose-plugin") {
			t.Errorf("%q: err = %v", c.knob, err)
		}
		// where Debian 12 gets compose v2: not its own archive
		for _, w := range []string{"download.docker.com", "/usr/libexec/docker/cli-plugins/docker-compose"} {
			if e != nil && !strings.Contains(e.Hint, w) {
				t.Errorf("%q: the hint does not say where compose v2 comes from (%s): %s", c.knob, w, e.Hint)
			}
		}
		if r := effects.ReasonOf(err); r != vocab.ReasonComposeMissing {
			t.Errorf("%q: the CLI is there, compose v2 is not: reason %q, want %q", c.knob, r, vocab.ReasonComposeMissing)
		}
	}
	f.knob(t, "compose-version", "2.40.3\n")
	if err := f.cli.Ready(context.Background()); err != nil {
		t.Errorf("--short style answer: %v", err)
	}
	for _, c := range testkit.DockerCalls(t, f.log) {
		if !strings.Contains(c.Line(), "compose version") && c.Line() != "info -f {{.ServerVersion}}" {
			t.Errorf("Ready made another call: %s", c.Line())
		}
	}
	f.knob(t, "engine-down", "1")
	var e *effects.Error
	if err := f.cli.Ready(context.Background()); !errors.As(err, &e) || e.Code != vocab.DockerEngineDown || e.Kind != effects.Temporary ||
		!strings.Contains(e.Msg, "the Docker engine does not answer") || !strings.Contains(e.Msg, "Cannot connect to the Docker daemon") {
		t.Errorf("engine down: %v", err)
	}
	err := New("monky-no-such-docker", "p", t.TempDir()).Ready(context.Background())
	if effects.CodeOf(err) != vocab.DockerNotFound || !strings.Contains(err.Error(), "not found on PATH") || effects.ReasonOf(err) != "" {
		t.Errorf("no CLI: %v (reason %q)", err, effects.ReasonOf(err))
	}
	if !errors.As(err, &e) || !strings.Contains(e.Hint, "download.docker.com") || !strings.Contains(e.Hint, "docker-compose-plugin") || !strings.Contains(e.Hint, "docker_bin") {
		t.Errorf("no CLI: the hint does not say where Docker Engine with compose v2 comes from: %v", err)
	}
}

// ProjectPS asks compose by the project's name alone, in an empty directory: no release is read
// (purge runs as root over a release tree that is the agent's user's).
func TestProjectPSReadsNoRelease(t *testing.T) {
	f := newFixture(t)
	if _, err := f.cli.ProjectPS(context.Background()); err != nil {
		t.Fatalf("ProjectPS: %v", err)
	}
	calls := testkit.DockerCalls(t, f.log)
	if len(calls) != 1 || !strings.Contains(calls[0].Line(), "--project-directory") || !strings.Contains(calls[0].Line(), " ps --all --format json") {
		t.Fatalf("calls: %v", calls)
	}
}
