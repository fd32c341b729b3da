// Package rig builds the in-process worlds the benchmarks of package bench and the bench
// programs drive: the simulator's handlers served without sockets, one agent per state dir,
// a quiet in-process compose, and effects that time what they wait for. It exists for
// measurement only: nothing in the agent imports it, and it never dials beyond its process.
package rig

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/bao"
	"github.com/tikali/monky-deployd/effects/docker"
	"github.com/tikali/monky-deployd/effects/tenancy"
	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/states"
	"github.com/tikali/monky-deployd/store"
	"github.com/tikali/monky-deployd/test/sim"
)

// Clock is a settable clock shared by the agent and the simulator.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// Hosts the in-process round tripper answers for.
const (
	TenancyURL = "http://tenancy.sim"
	BaoURL     = "http://bao.sim"
)

// inProcess serves requests by calling the simulator's handlers directly: the agent's HTTP
// clients, JSON and headers all run, only the socket is missing.
type inProcess struct{ ten, bao http.Handler }

func (p inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	var h http.Handler
	switch req.URL.Hostname() {
	case "tenancy.sim":
		h = p.ten
	case "bao.sim":
		h = p.bao
	default:
		return nil, fmt.Errorf("rig: no route to %s", req.URL.Host)
	}
	sreq := req.Clone(req.Context())
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "127.0.0.1:1"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, sreq)
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return rec.Result(), nil
}

// ScratchDir is a working directory called name under /dev/shm, where fsync is cheap, or under
// the temp directory where there is no /dev/shm.
func ScratchDir(name string) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return filepath.Join("/dev/shm", name)
	}
	return filepath.Join(os.TempDir(), name)
}

// Compose is an in-process compose: ps answers two running containers, healthy unless the
// release that was last brought up has a compose file naming an image tag that starts with
// "bad-". It counts the calls.
type Compose struct {
	docker.Model // the release's model is loaded and resolved as the agent does
	unhealthy    atomic.Bool
	PSCalls      atomic.Int64
	UpCalls      atomic.Int64
}

// PS lists the two containers.
func (c *Compose) PS(context.Context, string) ([]effects.Container, error) {
	c.PSCalls.Add(1)
	health := "healthy"
	if c.unhealthy.Load() {
		health = "unhealthy"
	}
	return []effects.Container{{Name: "api-1", Service: "api", State: "running", Health: health},
		{Name: "worker-1", Service: "worker", State: "running"}}, nil
}

// SetUnhealthy makes ps answer the api service unhealthy (or healthy again): a service that
// turns unhealthy on its own.
func (c *Compose) SetUnhealthy(on bool) { c.unhealthy.Store(on) }

// Pull does nothing.
func (c *Compose) Pull(context.Context, string) error { return nil }

// Up marks the project unhealthy when dir's compose file names a bad- image tag.
func (c *Compose) Up(_ context.Context, dir string) error {
	c.UpCalls.Add(1)
	b, err := os.ReadFile(filepath.Join(dir, "compose.yaml"))
	if err != nil {
		return fmt.Errorf("compose up: %w", err)
	}
	c.unhealthy.Store(strings.Contains(string(b), ":bad-"))
	return nil
}

// Down does nothing.
func (c *Compose) Down(context.Context, string, bool) error { return nil }

// Logs answers one line.
func (c *Compose) Logs(context.Context, string, int) (string, error) { return "api | started\n", nil }

// DataRoot is a fixed path.
func (c *Compose) DataRoot(context.Context) (string, error) { return "/var/lib/docker", nil }

// ImagePrune does nothing.
func (c *Compose) ImagePrune(context.Context) error { return nil }

// Disk reports plenty of free space.
type Disk struct{}

// Free is 500 GiB.
func (Disk) Free(string) (uint64, error) { return 500 << 30, nil }

// World is one simulator with one env and one agent on it.
type World struct {
	Sim     *sim.Sim
	Clock   *Clock
	Dir     string
	Kit     string
	Cfg     *config.Config
	Store   *store.Bolt
	Compose *Compose
	Waits   *Waits
	Agent   *states.Agent
	Env     string
	Log     io.Writer
}

// Options shape a World.
type Options struct {
	Dir   string    // the world's directory (state dir, deploy dir, kit)
	Env   string    // env_id (default env-qa-02)
	Start time.Time // the clock's start (default 2026-01-01)
	Log   io.Writer // the agent's log (default discarded)
	// RealTime uses the wall clock and real sleeps instead of the settable clock.
	RealTime bool
	// LeaseLimit is the simulator's leases per env per hour (default 5).
	LeaseLimit int
}

// NewWorld starts the simulator in process, writes a kit and builds an agent whose effects
// reach the simulator's handlers without sockets.
func NewWorld(o Options) (*World, error) {
	if o.Env == "" {
		o.Env = "env-qa-02"
	}
	if o.Start.IsZero() {
		o.Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	w := &World{Clock: NewClock(o.Start), Dir: o.Dir, Env: o.Env, Compose: &Compose{}, Log: o.Log}
	now := w.Clock.Now
	if o.RealTime {
		now = time.Now
	}
	s, err := sim.New(sim.Options{Now: now, LeaseLimit: o.LeaseLimit})
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	w.Sim = s
	s.AddEnv(o.Env)
	s.SetBaoAddr(BaoURL)
	s.SetTenancyAddr(TenancyURL)
	s.PutSecret(o.Env, "gemini", map[string]string{"value": "bench-gemini-v1"})
	s.PutSecret(o.Env, "db", map[string]string{"password": "bench-db-pw"})
	w.Kit = filepath.Join(o.Dir, "kit")
	stateDir := filepath.Join(o.Dir, "state")
	if err := s.WriteKit(w.Kit, sim.Kit{EnvID: o.Env, TenancyURL: TenancyURL, BaoURL: BaoURL,
		StateDir: stateDir, DeployDir: filepath.Join(stateDir, o.Env), DockerBin: "/bin/false"}); err != nil {
		return nil, err
	}
	cfg, err := config.Load(filepath.Join(w.Kit, "config.yaml"))
	if err != nil {
		return nil, err
	}
	w.Cfg = cfg
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, err
	}
	st, err := store.OpenBolt(cfg.StatePath(), store.BoltOptions{})
	if err != nil {
		return nil, err
	}
	w.Store = st
	hc := &http.Client{Transport: inProcess{ten: s.TenancyHandler(), bao: s.BaoHandler()}, Timeout: 10 * time.Second}
	bc, err := bao.New(cfg.Bao.Addr, hc, 10*time.Second)
	if err != nil {
		return nil, err
	}
	w.Waits = &Waits{}
	fx := states.Effects{Tenancy: tenancy.New(cfg.TenancyBaseURL(), hc, "system", now), Bao: bc, Compose: w.Compose, Disk: Disk{}}
	a := &states.Agent{
		Cfg: cfg, Store: st, Now: now, Host: "box-1", Version: "0.0.0-bench",
		Log: zerolog.New(o.Log), Fx: w.Waits.Wrap(fx), Prune: true,
		ContainerdRoots: []string{}, HealthPoll: time.Second,
	}
	if !o.RealTime {
		a.Sleep = func(ctx context.Context, d time.Duration) error { w.Clock.Advance(d); return nil }
	}
	w.Agent = a
	return w, nil
}

// Release adds a release of a small backend and makes it desired; extra files (name →
// content) are added to it. A name starting with "bad-" turns unhealthy when brought up; a
// name starting with "refuse-" references a variable no secret supplies (a refusal).
func (w *World) Release(name string, extra map[string][]byte) (string, error) {
	files := Backend(w.Env, name)
	for k, v := range extra {
		files[k] = v
	}
	sha, err := w.Sim.AddRelease(w.Env, name, files)
	if err != nil {
		return "", err
	}
	return sha, w.Sim.SetDesired(w.Env, sha)
}

// Backend is the files of a two-service release called name for env.
func Backend(env, name string) map[string][]byte {
	tmpl := "GEMINI_API_KEY=${GEMINI_API_KEY}\nDB_PASSWORD=${DB_PASSWORD}\nRELEASE=" + name + "\n"
	if strings.HasPrefix(name, "refuse-") {
		tmpl += "X=${UNSUPPLIED}\n"
	}
	return map[string][]byte{
		"compose.yaml": []byte("services:\n  api:\n    image: harbor.example/monky/api:" + name +
			"\n    env_file: .env\n    healthcheck:\n      test: [\"CMD\", \"true\"]\n  worker:\n    image: harbor.example/monky/worker:" + name + "\n    env_file: .env\n"),
		".env.template": []byte(tmpl),
		"secrets.manifest.json": []byte(strings.ReplaceAll(`{"entries": [
  {"var": "GEMINI_API_KEY", "path": "monky/data/ENV/see/gemini", "key": "value"},
  {"var": "DB_PASSWORD", "path": "monky/data/ENV/see/db", "key": "password"}
]}`, "ENV", env)),
		"config/app.toml": []byte("name = \"" + name + "\"\n"),
	}
}

// Tick runs one tick.
func (w *World) Tick() states.Result { return w.Agent.Tick(context.Background()) }
