package states_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tikali/monky-deployd/effects/bao"
	"github.com/tikali/monky-deployd/effects/docker"
	"github.com/tikali/monky-deployd/effects/tenancy"
	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/sim"
	"github.com/tikali/monky-deployd/states"
	"github.com/tikali/monky-deployd/store"
	"github.com/tikali/monky-deployd/transport"
)

const env = "env-qa-02"

var fakeDocker string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "monky-fakedocker-")
	if err != nil {
		panic(err)
	}
	fakeDocker = filepath.Join(dir, "docker")
	out, err := exec.Command("go", "build", "-o", fakeDocker, "../internal/fakedocker").CombinedOutput()
	if err != nil {
		panic("build fake docker: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// clock is a fake clock shared by the agent and the simulator.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
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
	clock       *clock
	disk        *disk
	dockerLog   string
	dockerState string
	logs        *bytes.Buffer
}

// newHarness starts the simulator, writes a kit with a bootstrap grant, and adds the
// releases given as name → files (bundle.json partial allowed).
func newHarness(t testing.TB, simOpts ...func(*sim.Options)) *harness {
	t.Helper()
	h := &harness{t: t, clock: &clock{t: time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)}, disk: &disk{free: 500 << 30}, logs: &bytes.Buffer{}}
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
	if err := s.WriteKit(h.kit, sim.Kit{EnvID: env, TenancyURL: h.ten.URL, BaoURL: h.bao.URL,
		StateDir: filepath.Join(h.dir, "state"), DeployDir: filepath.Join(h.dir, "state", env), DockerBin: fakeDocker}); err != nil {
		t.Fatal(err)
	}
	h.reload()
	h.dockerLog = filepath.Join(h.dir, "docker.log")
	h.dockerState = filepath.Join(h.dir, "docker-state")
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
	d, err := transport.New(h.cfg)
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
		Sleep: func(ctx context.Context, d time.Duration) error { h.clock.Advance(d); return nil },
		Fx: states.Effects{
			Tenancy: tenancy.New(h.cfg.TenancyBaseURL(), hc, "system", h.clock.Now),
			Bao:     bc,
			Compose: docker.New(fakeDocker, h.cfg.ComposeProject, h.cfg.DockerConfigDir()),
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

// dockerCalls returns the fake docker's recorded argv lines (joined by spaces).
func (h *harness) dockerCalls() []string {
	b, err := os.ReadFile(h.dockerLog)
	if err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var c struct {
			Argv         []string `json:"argv"`
			DockerConfig string   `json:"docker_config"`
		}
		if json.Unmarshal(sc.Bytes(), &c) == nil {
			out = append(out, strings.Join(c.Argv, " "))
		}
	}
	return out
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

func (h *harness) wantExit(got, want int) {
	h.t.Helper()
	if got != want {
		h.t.Fatalf("exit %d, want %d\nlogs:\n%s", got, want, h.logs.String())
	}
}
