package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Box is one simulated install driven through the built binaries, as an operator's box runs
// them: a monky-sim process serving releases, the kit it wrote (config.yaml and the bootstrap
// grant), the agent's state_dir, and the docker stub's state directory and call log. The
// binaries are BinDir's: monky-sim and docker (the stub) for the box itself, and whatever
// agent builds the test runs. Every output of every run is kept in Outputs, for the secret
// scans. A Box made as a literal with T and Dir alone runs binaries without a simulator.
type Box struct {
	T           testing.TB
	Env         string // the env_id the simulator serves
	Dir         string // the box's temp dir: everything below lives in it
	Kit         string
	StateDir    string
	AddrFile    string // where monky-sim wrote its three URLs
	DockerState string // the docker stub's FAKE_DOCKER_STATE
	DockerLog   string // the docker stub's FAKE_DOCKER_LOG
	Grant       string // bootstrap.jwt as the kit wrote it, read before any run
	Outputs     []string
	stop        func()
	adminURL    string // the simulator's admin API, read from AddrFile at the first call
}

// BoxOptions say what a box's simulator serves.
type BoxOptions struct {
	Env      string   // --env
	Releases string   // --releases: a directory of releases (and secrets.json)
	Args     []string // more `monky-sim serve` flags
}

// BuildBox builds what a box runs besides the agent: monky-sim and the docker stub (as
// "docker"). StartBox calls it; a TestMain that wants every build done before the first test
// (and BinDir complete) calls it too.
func BuildBox() error {
	if _, err := Build("docker", fakeDockerPkg); err != nil {
		return err
	}
	_, err := Build("monky-sim", "./cmd/monky-sim")
	return err
}

// StartBox starts the simulator of a new box (building it first when this process has not)
// and waits for its addresses and kit. The simulator is stopped when the test ends, or by
// Stop.
func StartBox(tb testing.TB, o BoxOptions) *Box {
	tb.Helper()
	if err := BuildBox(); err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	b := &Box{T: tb, Env: o.Env, Dir: dir, Kit: filepath.Join(dir, "kit"), StateDir: filepath.Join(dir, "state"),
		AddrFile: filepath.Join(dir, "addr.json"), DockerState: filepath.Join(dir, "docker-state"),
		DockerLog: filepath.Join(dir, "docker-calls.jsonl")}
	if err := os.MkdirAll(b.DockerState, 0o700); err != nil {
		tb.Fatal(err)
	}
	simLog, err := os.Create(filepath.Join(dir, "sim.log"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(Bin("monky-sim"), "serve", "--releases", o.Releases, "--env", o.Env, "--kit", b.Kit,
		"--addr-file", b.AddrFile, "--state-dir", b.StateDir, "--docker-bin", FakeDockerWrapper(tb, dir, b.DockerLog, b.DockerState), "--quiet")
	cmd.Args = append(cmd.Args, o.Args...)
	cmd.Stdout, cmd.Stderr = simLog, simLog
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	b.stop = sync.OnceFunc(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		simLog.Close()
	})
	tb.Cleanup(b.stop)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(b.AddrFile); err == nil && fi.Size() > 0 {
			break
		}
		select {
		case <-done:
			raw, _ := os.ReadFile(simLog.Name())
			tb.Fatalf("monky-sim stopped at start:\n%s", raw)
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatal("monky-sim wrote no addr file within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	g, err := os.ReadFile(filepath.Join(b.Kit, "bootstrap.jwt"))
	if err != nil {
		tb.Fatalf("kit: %v", err)
	}
	b.Grant = strings.TrimSpace(string(g))
	if b.Grant == "" {
		tb.Fatal("kit: empty bootstrap.jwt")
	}
	return b
}

// Stop stops the simulator (a box made without StartBox has none); the box's files stay for
// the test to read.
func (b *Box) Stop() {
	if b.stop != nil {
		b.stop()
	}
}

// Config is the kit's config.yaml, the agent's --config.
func (b *Box) Config() string { return filepath.Join(b.Kit, "config.yaml") }

// AppendConfig adds lines (each ending in a newline) to the kit's config.yaml.
func (b *Box) AppendConfig(lines string) {
	b.T.Helper()
	f, err := os.OpenFile(b.Config(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		b.T.Fatal(err)
	}
	_, err = f.WriteString(lines)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.T.Fatal(err)
	}
}

// Command is bin (a binary of BinDir) with args in the box's environment: the docker stub's log and state, no
// colour, and no config or failpoint from the caller's environment.
func (b *Box) Command(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(Bin(bin), args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FAKE_DOCKER_LOG="+b.DockerLog, "FAKE_DOCKER_STATE="+b.DockerState,
		"MONKY_DEPLOYD_CONFIG=", "MONKY_DEPLOYD_FAILPOINT=")
	return cmd
}

// Run runs bin with args and extra environment (which wins over the box's) to its end.
func (b *Box) Run(bin string, env []string, args ...string) Result {
	b.T.Helper()
	return b.RunKilled(-1, bin, env, args...)
}

// RunKilled is Run, with SIGKILL sent to the process after delay (none when delay < 0).
func (b *Box) RunKilled(delay time.Duration, bin string, env []string, args ...string) Result {
	b.T.Helper()
	cmd := b.Command(bin, args...)
	cmd.Env = append(cmd.Env, env...)
	r, err := Exec(cmd, delay)
	b.Outputs = append(b.Outputs, r.Stdout, r.Stderr)
	if err != nil {
		b.T.Fatalf("%s %v: %v", bin, args, err)
	}
	return r
}

// Result is how a run of a binary ended.
type Result struct {
	Stdout, Stderr string
	Code           int            // the exit code; -1 when a signal ended it
	Sig            syscall.Signal // the signal that ended it, or 0
	Took           time.Duration
}

// Exec runs cmd to its end with its output captured, sending SIGKILL after delay when delay
// is not negative. The error is for a command that could not run; an exit code other than 0,
// or a death by a signal, is in the Result.
func Exec(cmd *exec.Cmd, delay time.Duration) (Result, error) {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Start()
	if err == nil {
		if delay >= 0 {
			timer := time.AfterFunc(delay, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
			defer timer.Stop()
		}
		err = cmd.Wait()
	}
	r := Result{Stdout: out.String(), Stderr: errb.String(), Took: time.Since(start)}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.Code, err = ee.ExitCode(), nil
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Sig = ws.Signal()
		}
	}
	return r, err
}

// Sim runs a monky-sim client command against the box's simulator and returns its output;
// a failure fails the test. Desire, Counts, Reports and ReleaseShas ask the admin API from
// this process instead: a crash matrix of a thousand boxes calls them thousands of times.
func (b *Box) Sim(cmd string, args ...string) string {
	b.T.Helper()
	r := b.Run("monky-sim", nil, append([]string{cmd, "--addr-file", b.AddrFile, "--env", b.Env}, args...)...)
	if r.Code != 0 {
		b.T.Fatalf("monky-sim %s %v: exit %d: %s", cmd, args, r.Code, r.Stderr)
	}
	return r.Stdout
}

// Admin calls the simulator's admin API at path (its query included) with body as JSON (when
// not nil) and decodes the answer into out (when not nil), as `monky-sim <command>` does; the
// answer is kept in Outputs with the runs' output. A failure fails the test.
func (b *Box) Admin(method, path string, body, out any) {
	b.T.Helper()
	if b.adminURL == "" {
		raw, err := os.ReadFile(b.AddrFile)
		var a struct {
			Admin string `json:"admin"`
		}
		if err == nil {
			err = json.Unmarshal(raw, &a)
		}
		if err != nil || a.Admin == "" {
			b.T.Fatalf("admin api: the addr file %s names none: %v", b.AddrFile, err)
		}
		b.adminURL = strings.TrimRight(a.Admin, "/")
	}
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			b.T.Fatalf("admin %s: %v", path, err)
		}
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, b.adminURL+path, rd)
	if err != nil {
		b.T.Fatalf("admin %s: %v", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.T.Fatalf("admin %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil || resp.StatusCode/100 != 2 {
		b.T.Fatalf("admin %s %s: %s %v: %s", method, path, resp.Status, err, raw)
	}
	b.Outputs = append(b.Outputs, string(raw))
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			b.T.Fatalf("admin %s: the answer: %v: %s", path, err, raw)
		}
	}
}

// query is the box's env as the admin API's query string.
func (b *Box) query() string { return "?env=" + url.QueryEscape(b.Env) }

// Desire makes release the one tenancy desires for the box (`monky-sim desire --release`).
func (b *Box) Desire(release string) {
	b.T.Helper()
	b.Admin(http.MethodPost, "/admin/desire", map[string]string{"env": b.Env, "release": release}, nil)
}

// SimCounts are the simulator's request counters for the box's env (`monky-sim counts`).
type SimCounts struct {
	Checkins      int `json:"checkins"`
	BundleFetches int `json:"bundle_fetches"`
	LeaseAsks     int `json:"lease_asks"`
	Leases        int `json:"leases"`
	Logins        int `json:"logins"`
	Reports       int `json:"reports"`
	Revocations   int `json:"revocations"`
}

// Counts asks the simulator for its counters.
func (b *Box) Counts() SimCounts {
	b.T.Helper()
	var c SimCounts
	b.Admin(http.MethodGet, "/admin/counts"+b.query(), nil, &c)
	return c
}

// SimReport is one report tenancy received (`monky-sim reports`).
type SimReport struct {
	Sha        string `json:"sha"`
	Result     string `json:"result"`
	Detail     string `json:"detail"`
	RevertedTo string `json:"reverted_to"`
}

// Reports are the reports tenancy received, oldest first.
func (b *Box) Reports() []SimReport {
	b.T.Helper()
	var out []SimReport
	b.Admin(http.MethodGet, "/admin/reports"+b.query(), nil, &out)
	return out
}

// ReleaseShas maps release name → sha as the simulator serves them.
func (b *Box) ReleaseShas() map[string]string {
	b.T.Helper()
	var rows []struct {
		Name string `json:"name"`
		Sha  string `json:"sha"`
	}
	b.Admin(http.MethodGet, "/admin/releases"+b.query(), nil, &rows)
	m := map[string]string{}
	for _, r := range rows {
		m[r.Name] = r.Sha
	}
	return m
}

// DockerCalls counts the docker stub's recorded calls whose argv holds every word of sub, in
// order.
func (b *Box) DockerCalls(sub ...string) int {
	b.T.Helper()
	return CountDockerCalls(b.T, b.DockerLog, sub...)
}

// DockerKnob writes a knob file of the docker stub (see test/fakedocker), or removes it
// when content is "".
func (b *Box) DockerKnob(name, content string) {
	b.T.Helper()
	SetDockerKnob(b.T, b.DockerState, name, content)
}
