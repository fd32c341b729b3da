package states_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tikali/monky-deployd/effects/bao"
	"github.com/tikali/monky-deployd/effects/docker"
	"github.com/tikali/monky-deployd/effects/tenancy"
	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/testkit"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/states"
	"github.com/tikali/monky-deployd/store"
	"github.com/tikali/monky-deployd/test/sim"
	"github.com/tikali/monky-deployd/transport"
)

const env = "env-qa-02"

// TestMain runs the tests' boxes as the packaged agent's user, monky-deployd, whoever runs the
// tests: their fix lines say sudo -u monky-deployd, as a box's do.
func TestMain(m *testing.M) {
	states.UserName = func() string { return "monky-deployd" }
	testkit.Main(m)
}

// disk reports a settable amount of free space.
type disk struct{ free uint64 }

func (d *disk) Free(string) (uint64, error) { return d.free, nil }

type harness struct {
	t           testing.TB
	sim         *sim.Sim
	ten, bao    *httptest.Server
	dir, kit    string
	cfg         *config.Config
	st          *store.Bolt
	clock       *testkit.Clock
	docker      string // the docker stub
	disk        *disk
	dockerLog   string
	dockerState string
	logs        *bytes.Buffer
}

// newHarness starts the simulator, writes a kit with a bootstrap grant, and adds the
// releases given as name → files (bundle.json partial allowed).
func newHarness(t testing.TB, simOpts ...func(*sim.Options)) *harness {
	t.Helper()
	h := &harness{t: t, clock: testkit.NewClock(testkit.Epoch), disk: &disk{free: 500 << 30}, logs: &bytes.Buffer{}}
	so := sim.Options{Now: h.clock.Now}
	for _, o := range simOpts {
		o(&so)
	}
	s, err := sim.New(so)
	if err != nil {
		t.Fatal(err)
	}
	h.sim = s
	s.AddEnv(env)
	h.ten = httptest.NewServer(s.TenancyHandler())
	h.bao = httptest.NewServer(s.BaoHandler())
	t.Cleanup(func() { h.ten.Close(); h.bao.Close() })
	s.SetBaoAddr(h.bao.URL)
	h.dir = t.TempDir()
	h.kit = filepath.Join(h.dir, "kit")
	h.dockerLog = filepath.Join(h.dir, "docker.log")
	h.dockerState = filepath.Join(h.dir, "docker-state")
	h.docker = testkit.FakeDockerFor(t, h.dockerLog, h.dockerState)
	if err := s.WriteKit(h.kit, sim.Kit{EnvID: env, TenancyURL: h.ten.URL, BaoURL: h.bao.URL,
		StateDir: filepath.Join(h.dir, "state"), DeployDir: filepath.Join(h.dir, "state", env), DockerBin: h.docker}); err != nil {
		t.Fatal(err)
	}
	h.reload()
	if err := os.MkdirAll(h.dockerState, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_DOCKER_LOG", h.dockerLog)
	t.Setenv("FAKE_DOCKER_STATE", h.dockerState)
	s.PutSecret(env, "gemini", map[string]string{"value": "canary-gemini-v1-Qx7"})
	s.PutSecret(env, "gemini", map[string]string{"value": "canary-gemini-v2-Zp9"})
	s.PutSecret(env, "db", map[string]string{"password": "canary-db-pw-Kw3"})
	return h
}

// rewriteConfig replaces from with to in the kit's config and reads it again.
func (h *harness) rewriteConfig(from, to string) {
	h.t.Helper()
	p := filepath.Join(h.kit, "config.yaml")
	b, _ := os.ReadFile(p)
	if !strings.Contains(string(b), from) {
		h.t.Fatalf("config lacks %q", from)
	}
	os.WriteFile(p, []byte(strings.Replace(string(b), from, to, 1)), 0o640)
	h.reload()
}

// appendConfig adds lines to the kit's config and reads it again.
func (h *harness) appendConfig(lines string) {
	h.t.Helper()
	p := filepath.Join(h.kit, "config.yaml")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, append(b, lines...), 0o640)
	h.reload()
}

// putGrant writes grant where the kit puts the bootstrap grant.
func (h *harness) putGrant(grant string) {
	h.t.Helper()
	if err := os.WriteFile(h.cfg.BootstrapPath, []byte(grant+"\n"), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

// freshGrant puts a freshly minted bootstrap grant on disk (beside a working token it is left
// alone).
func (h *harness) freshGrant() {
	h.t.Helper()
	grant, err := h.sim.MintGrant(env, time.Hour)
	if err != nil {
		h.t.Fatal(err)
	}
	h.putGrant(grant)
}

// reload reads the kit's config again (as a new process would).
func (h *harness) reload() {
	h.t.Helper()
	cfg, err := config.Load(filepath.Join(h.kit, "config.yaml"))
	if err != nil {
		h.t.Fatal(err)
	}
	h.cfg = cfg
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		h.t.Fatal(err)
	}
	st, err := store.OpenBolt(cfg.StatePath(), store.BoltOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.st = st
}

func (h *harness) agent() *states.Agent {
	h.t.Helper()
	d, err := transport.New(transport.FromConfig(h.cfg))
	if err != nil {
		h.t.Fatal(err)
	}
	hc, err := transport.HTTPClient(d, "127.0.0.1", "", 5*time.Second)
	if err != nil {
		h.t.Fatal(err)
	}
	bc, err := bao.New(h.cfg.Bao.Addr, hc, 5*time.Second)
	if err != nil {
		h.t.Fatal(err)
	}
	return &states.Agent{
		Cfg: h.cfg, Store: h.st, Now: h.clock.Now, Host: "box-1", Version: "1.0.0-test",
		Log:   zerolog.New(redact.Default.Writer(h.logs)),
		Sleep: h.clock.Sleep,
		Fx: states.Effects{
			Tenancy: tenancy.New(h.cfg.TenancyBaseURL(), hc, "system", h.clock.Now),
			Bao:     bc,
			Compose: docker.New(h.docker, h.cfg.ComposeProject, h.cfg.DockerConfigDir()),
			Disk:    h.disk,
		},
		ContainerdRoots: []string{},
	}
}

// tick runs one tick and returns its exit code, advancing the clock a minute after it.
func (h *harness) tick() int {
	h.t.Helper()
	res := h.agent().Tick(context.Background())
	h.clock.Advance(time.Minute)
	return res.Exit
}

// release adds a release of the standard test backend and makes it desired.
func (h *harness) release(name string, mutate func(files map[string][]byte)) string {
	h.t.Helper()
	files := backend(name)
	if mutate != nil {
		mutate(files)
	}
	sha, err := h.sim.AddRelease(env, name, files)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.sim.SetDesired(env, sha); err != nil {
		h.t.Fatal(err)
	}
	return sha
}

// apply adds release name of the standard test backend, makes it desired and runs a tick that
// must exit 0 (an apply, when the release is new); it returns the release's sha.
func (h *harness) apply(name string) string {
	h.t.Helper()
	sha := h.release(name, nil)
	h.wantExit(h.tick(), 0)
	return sha
}

func backend(name string) map[string][]byte {
	return map[string][]byte{
		"compose.yaml": []byte(`services:
  api:
    image: harbor.example/monky/api:` + name + `
    env_file: .env
    healthcheck:
      test: ["CMD", "true"]
  worker:
    image: harbor.example/monky/worker:` + name + `
    env_file: .env
`),
		".env.template": []byte("# rendered by tenancy: substitutes every ${VAR}\nGEMINI_API_KEY=${GEMINI_API_KEY}\nDB_PASSWORD=${DB_PASSWORD}\nLITERAL=$${NOT_A_REF}\nRELEASE=" + name + "\n"),
		"secrets.manifest.json": []byte(`{"entries": [
  {"var": "GEMINI_API_KEY", "path": "monky/data/env-qa-02/see/gemini", "key": "value", "version": 1},
  {"var": "DB_PASSWORD", "path": "monky/data/env-qa-02/see/db", "key": "password"}
]}`),
		"config/app.toml": []byte("name = \"" + name + "\"\n"),
	}
}

// withRegistryAuth is a release's mutation whose manifest also reads the registry credential
// (use: registry-auth, secret registry version 1).
func withRegistryAuth(f map[string][]byte) {
	f["secrets.manifest.json"] = []byte(`{"entries": [
  {"var": "GEMINI_API_KEY", "path": "monky/data/env-qa-02/see/gemini"},
  {"var": "DB_PASSWORD", "path": "monky/data/env-qa-02/see/db", "key": "password"},
  {"use": "registry-auth", "path": "monky/data/env-qa-02/see/registry", "version": 1}
]}`)
}

// dockerCalls returns the fake docker's recorded argv lines (joined by spaces).
func (h *harness) dockerCalls() []string {
	h.t.Helper()
	var out []string
	for _, c := range testkit.DockerCalls(h.t, h.dockerLog) {
		out = append(out, c.Line())
	}
	return out
}

// dockerKnob writes a knob file of the docker stub (see test/fakedocker), or removes it
// when content is "".
func (h *harness) dockerKnob(name, content string) {
	h.t.Helper()
	testkit.SetDockerKnob(h.t, h.dockerState, name, content)
}

// composeCalls are the docker calls other than ps/info/version (what changes the box).
func (h *harness) composeCalls() []string {
	var out []string
	for _, c := range h.dockerCalls() {
		if strings.Contains(c, " ps ") || strings.HasSuffix(c, " ps") || strings.Contains(c, "info") || strings.Contains(c, "version") || strings.Contains(c, " logs ") {
			continue
		}
		out = append(out, c)
	}
	return out
}

func (h *harness) record() store.Record {
	h.t.Helper()
	var rec store.Record
	if err := h.st.View(func(tx store.Tx) error {
		var err error
		rec, err = tx.Record()
		return err
	}); err != nil {
		h.t.Fatal(err)
	}
	return rec
}

func (h *harness) lastReport() (result, detail string) {
	reps := h.sim.Reports(env)
	if len(reps) == 0 {
		return "", ""
	}
	r := reps[len(reps)-1]
	return r.Result, r.Detail
}

// wantConverged runs a tick that must exit 0 and leave the machine Reported; when names the
// moment in the failure.
func (h *harness) wantConverged(when string) {
	h.t.Helper()
	h.wantExit(h.tick(), 0)
	if rec := h.record(); rec.State != "Reported" {
		h.t.Errorf("%s: state %s, want Reported", when, rec.State)
	}
}

// wantBlocked fails the test unless the machine is Blocked with code.
func (h *harness) wantBlocked(code vocab.Code) {
	h.t.Helper()
	if rec := h.record(); rec.State != "Blocked" || rec.Block == nil || rec.Block.Code != code {
		h.t.Fatalf("state %s block %+v, want Blocked %s", rec.State, rec.Block, code)
	}
}

// wantGone fails the test, naming what, when path is there.
func (h *harness) wantGone(path, what string) {
	h.t.Helper()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		h.t.Errorf("%s: %v", what, err)
	}
}

func (h *harness) wantExit(got, want int) {
	h.t.Helper()
	if got != want {
		h.t.Fatalf("exit %d, want %d\nlogs:\n%s", got, want, h.logs.String())
	}
}
