package robust

// The shared harness: TestMain builds the binaries once; a box is one simulated install (a
// running monky-sim with its own releases, kit and state_dir). Every output of every run is
// kept for the secret scan.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const envID = "env-demo-01"

var (
	binDir      string // monky-deployd (failpoints compiled in), monky-sim, docker
	releasesDir string // v1, v2 and secrets.json with unique canaries
	canaries    map[string]string
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "monky-robust-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "robust:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = filepath.Join(dir, "bin")
	builds := [][]string{
		{"build", "-tags", "failpoints", "-o", filepath.Join(binDir, "monky-deployd"), "../../cmd/monky-deployd"},
		{"build", "-o", filepath.Join(binDir, "monky-sim"), "../../cmd/monky-sim"},
		{"build", "-o", filepath.Join(binDir, "docker"), "../../internal/fakedocker"},
	}
	for _, args := range builds {
		cmd := exec.Command("go", args...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "robust: go %s: %v\n%s", strings.Join(args, " "), err, out)
			return 1
		}
	}
	releasesDir = filepath.Join(dir, "releases")
	if err := writeReleases(releasesDir); err != nil {
		fmt.Fprintln(os.Stderr, "robust:", err)
		return 1
	}
	return m.Run()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// writeReleases copies the demo releases and adds a registry credential entry to each
// manifest, so a tick writes the docker config too; every secret value is a unique canary.
func writeReleases(dst string) error {
	canaries = map[string]string{
		"gemini v2 secret": "CANARY-gemini-" + randHex(8),
		"db secret":        "CANARY-db-" + randHex(8),
		"registry secret":  "CANARY-registry-" + randHex(8),
	}
	for _, rel := range []string{"v1", "v2"} {
		src := filepath.Join("..", "..", "testdata", "demo", rel)
		err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			r, _ := filepath.Rel(src, p)
			out := filepath.Join(dst, rel, r)
			if fi.IsDir() {
				return os.MkdirAll(out, 0o755)
			}
			raw, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if fi.Name() == "secrets.manifest.json" {
				var doc struct {
					Entries []map[string]any `json:"entries"`
				}
				if err := json.Unmarshal(raw, &doc); err != nil {
					return err
				}
				doc.Entries = append(doc.Entries, map[string]any{"use": "registry-auth", "path": "monky/data/" + envID + "/see/registry", "key": "value"})
				raw, _ = json.Marshal(doc)
			}
			return os.WriteFile(out, raw, 0o644)
		})
		if err != nil {
			return fmt.Errorf("copy %s: %w", rel, err)
		}
	}
	reg, _ := json.Marshal(map[string]string{"registry": "registry.example.test", "username": "deploy", "password": canaries["registry secret"]})
	secrets := map[string]any{
		"gemini":   []map[string]string{{"value": "CANARY-gemini1-" + randHex(8)}, {"value": canaries["gemini v2 secret"]}, {"value": "CANARY-gemini3-" + randHex(8)}},
		"db":       map[string]string{"password": canaries["db secret"]},
		"registry": map[string]string{"value": string(reg)},
	}
	raw, _ := json.Marshal(secrets)
	return os.WriteFile(filepath.Join(dst, "secrets.json"), raw, 0o644)
}

// box is one simulated install.
type box struct {
	t        testing.TB
	dir      string
	kit      string
	stateDir string
	addrFile string
	dockerSt string
	dockerLg string
	grant    string
	outputs  []string
	stop     func()
}

func startBox(t testing.TB) *box { t.Helper(); return startBoxWith(t, releasesDir) }

// startBoxWith starts a box whose simulator serves the releases under rels.
func startBoxWith(t testing.TB, rels string) *box {
	t.Helper()
	dir := t.TempDir()
	b := &box{t: t, dir: dir, kit: filepath.Join(dir, "kit"), stateDir: filepath.Join(dir, "state"),
		addrFile: filepath.Join(dir, "addr.json"), dockerSt: filepath.Join(dir, "docker-state"),
		dockerLg: filepath.Join(dir, "docker-calls.jsonl")}
	if err := os.MkdirAll(b.dockerSt, 0o700); err != nil {
		t.Fatal(err)
	}
	simLog, err := os.Create(filepath.Join(dir, "sim.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "monky-sim"), "serve", "--releases", rels,
		"--env", envID, "--kit", b.kit, "--addr-file", b.addrFile, "--state-dir", b.stateDir,
		"--docker-bin", filepath.Join(binDir, "docker"), "--quiet")
	cmd.Stdout, cmd.Stderr = simLog, simLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	b.stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		simLog.Close()
	}
	t.Cleanup(b.stop)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(b.addrFile); err == nil && fi.Size() > 0 {
			break
		}
		select {
		case <-done:
			raw, _ := os.ReadFile(simLog.Name())
			t.Fatalf("monky-sim stopped at start:\n%s", raw)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("monky-sim wrote no addr file within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	g, err := os.ReadFile(filepath.Join(b.kit, "bootstrap.jwt"))
	if err != nil {
		t.Fatalf("kit: %v", err)
	}
	b.grant = strings.TrimSpace(string(g))
	return b
}

func (b *box) config() string { return filepath.Join(b.kit, "config.yaml") }

// run runs a binary of binDir; code is -1 and sig set when a signal killed it.
type runResult struct {
	out, err string
	code     int
	sig      syscall.Signal
	took     time.Duration
}

func (b *box) runBin(bin string, env []string, args ...string) runResult {
	b.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, bin), args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FAKE_DOCKER_LOG="+b.dockerLg, "FAKE_DOCKER_STATE="+b.dockerSt,
		"MONKY_DEPLOYD_CONFIG=", "MONKY_DEPLOYD_FAILPOINT=")
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := runResult{out: out.String(), err: errb.String(), took: time.Since(start)}
	b.outputs = append(b.outputs, r.out, r.err)
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			b.t.Fatalf("%s %v: %v", bin, args, err)
		}
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.sig = ws.Signal()
		}
	}
	return r
}

// agent runs the agent (failpoints compiled in, none set unless env names some).
func (b *box) agent(env []string, args ...string) runResult {
	b.t.Helper()
	return b.runBin("monky-deployd", env, append([]string{"--config", b.config()}, args...)...)
}

func (b *box) tick(env ...string) runResult { b.t.Helper(); return b.agent(env, "run", "--once") }

func (b *box) sim(cmd string, args ...string) string {
	b.t.Helper()
	r := b.runBin("monky-sim", nil, append([]string{cmd, "--addr-file", b.addrFile, "--env", envID}, args...)...)
	if r.code != 0 {
		b.t.Fatalf("monky-sim %s %v: exit %d: %s", cmd, args, r.code, r.err)
	}
	return r.out
}

type simCounts struct {
	Checkins      int `json:"checkins"`
	BundleFetches int `json:"bundle_fetches"`
	LeaseAsks     int `json:"lease_asks"`
	Leases        int `json:"leases"`
	Logins        int `json:"logins"`
	Reports       int `json:"reports"`
}

func (b *box) counts() simCounts {
	b.t.Helper()
	var c simCounts
	if err := json.Unmarshal([]byte(b.sim("counts")), &c); err != nil {
		b.t.Fatalf("counts: %v", err)
	}
	return c
}

type simReport struct {
	Sha    string `json:"sha"`
	Result string `json:"result"`
	Detail string `json:"detail"`
}

func (b *box) reports() []simReport {
	b.t.Helper()
	var out []simReport
	for _, l := range strings.Split(strings.TrimSpace(b.sim("reports")), "\n") {
		if l == "" {
			continue
		}
		var r simReport
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			b.t.Fatalf("report %q: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

// releaseShas maps release name → sha as the simulator serves them.
func (b *box) releaseShas() map[string]string {
	b.t.Helper()
	var rows []struct {
		Name string `json:"name"`
		Sha  string `json:"sha"`
	}
	if err := json.Unmarshal([]byte(b.sim("releases")), &rows); err != nil {
		b.t.Fatalf("releases: %v", err)
	}
	m := map[string]string{}
	for _, r := range rows {
		m[r.Name] = r.Sha
	}
	return m
}

type statusDoc struct {
	State      string `json:"state"`
	Next       string `json:"next"`
	AppliedSha string `json:"applied_sha"`
	DesiredSha string `json:"desired_sha"`
	Outbox     int    `json:"outbox"`
	LastExit   int    `json:"last_exit"`
}

func (b *box) status() statusDoc {
	b.t.Helper()
	r := b.agent(nil, "status", "--json")
	if r.code != 0 {
		b.t.Fatalf("status --json: exit %d: %s", r.code, r.err)
	}
	var d statusDoc
	if err := json.Unmarshal([]byte(r.out), &d); err != nil {
		b.t.Fatalf("status --json: %v\n%s", err, r.out)
	}
	return d
}
