package main

// Binary end-to-end tests: the built monky-deployd (plain, and with -tags failpoints) against
// the built monky-sim serving the demo backend, with the recording docker stub as docker_bin.
// What is asserted is what an operator sees: exit codes, stderr lines, explain/status output,
// the files in state_dir, and what tenancy and OpenBao received.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/testkit"
)

const demoEnv = "env-demo-01"

// wantVersion is what the built agent's `version` prints.
const wantVersion = "0.0.0-e2e"

// TestMain builds the agent as the package ships it (`make agent`: its failpoints are in it,
// inert unless MONKY_DEPLOYD_FAILPOINT names one), and what a box runs beside it: monky-sim and
// the docker stub.
func TestMain(m *testing.M) {
	os.Exit(testkit.Run(m, func() error {
		if err := testkit.BuildBox(); err != nil {
			return err
		}
		_, err := testkit.BuildAgent(wantVersion)
		return err
	}))
}

// box is one simulated install (testkit.Box) serving the demo backend.
type box struct{ *testkit.Box }

// startBox starts a box; args are more `monky-sim serve` flags.
func startBox(t *testing.T, args ...string) *box {
	t.Helper()
	return &box{testkit.StartBox(t, testkit.BoxOptions{Env: demoEnv, Releases: "../../testdata/demo", Args: args})}
}

// agent runs the plain agent with the box's config.
func (b *box) agent(args ...string) (string, string, int) {
	b.T.Helper()
	r := b.Run("monky-deployd", nil, append([]string{"--config", b.Config()}, args...)...)
	return r.Stdout, r.Stderr, r.Code
}

// tick runs `run --once` and fails the test unless it exits with want.
func (b *box) tick(want int) string {
	b.T.Helper()
	_, e, c := b.agent("run", "--once")
	if c != want {
		b.T.Fatalf("run --once exit %d, want %d; stderr:\n%s", c, want, e)
	}
	return e
}

// metricsFile sets the box's metrics_path to a file in a textfile directory of its own and
// returns the file's path.
func (b *box) metricsFile() string {
	b.T.Helper()
	prom := filepath.Join(b.Dir, "textfile", "monky_deployd.prom")
	if err := os.MkdirAll(filepath.Dir(prom), 0o755); err != nil {
		b.T.Fatal(err)
	}
	b.AppendConfig("metrics_path: " + prom + "\n")
	return prom
}

func countResult(rs []testkit.SimReport, result string) int {
	n := 0
	for _, r := range rs {
		if r.Result == result {
			n++
		}
	}
	return n
}

// explainJSON runs `explain --json` and decodes the parts the tests read.
type explainDoc struct {
	State string `json:"state"`
	Next  string `json:"next"`
	Ticks []struct {
		Exit   int    `json:"exit"`
		Action string `json:"action"`
	} `json:"ticks"`
}

func (b *box) explainJSON() explainDoc {
	b.T.Helper()
	o, e, c := b.agent("explain", "--json", "-n", "1")
	if c != 0 {
		b.T.Fatalf("explain --json: exit %d: %s", c, e)
	}
	var d explainDoc
	if err := json.Unmarshal([]byte(o), &d); err != nil {
		b.T.Fatalf("explain --json is not one JSON document: %v\n%s", err, o)
	}
	return d
}

func TestVersionAndConfigErrors(t *testing.T) {
	b := &testkit.Box{T: t, Dir: t.TempDir()} // no simulator: the agent alone
	run := func(args ...string) (string, string, int) {
		t.Helper()
		r := b.Run("monky-deployd", nil, args...)
		return r.Stdout, r.Stderr, r.Code
	}
	o, e, c := run("version")
	if first, _, _ := strings.Cut(o, "\n"); c != 0 || first != "monky-deployd "+wantVersion || !strings.Contains(o, "transports: ") || !strings.Contains(o, "go:         go1.") {
		t.Errorf("version: exit %d, stdout %q, stderr %q; want monky-deployd %s, the Go version and the transports", c, o, e, wantVersion)
	}
	o, e, c = run("version", "--json")
	var vi struct {
		Version          string   `json:"version"`
		Commit           string   `json:"commit"`
		Transports       []string `json:"transports"`
		DefaultTransport string   `json:"default_transport"`
	}
	if err := json.Unmarshal([]byte(o), &vi); c != 0 || err != nil || vi.Version != wantVersion || vi.Commit == "" ||
		vi.DefaultTransport != config.DefaultTransport() || !slices.Contains(vi.Transports, vi.DefaultTransport) {
		t.Errorf("version --json: exit %d, %v, stdout %q, stderr %q", c, err, o, e)
	}

	oneLine := func(name, stderr string, words ...string) {
		t.Helper()
		lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
		if len(lines) != 1 {
			t.Errorf("%s: want one stderr line, got %d:\n%s", name, len(lines), stderr)
		}
		for _, w := range words {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", name, w, stderr)
			}
		}
	}

	missing := filepath.Join(b.Dir, "nonexistent", "config.yaml")
	_, e, c = run("--config", missing, "run", "--once")
	if c != 1 {
		t.Errorf("missing config: exit %d, want 1", c)
	}
	oneLine("missing config", e, missing)

	bad := filepath.Join(b.Dir, "bad.yaml")
	testkit.WriteFile(t, bad, "env_id: env-qa-02\nsite: cbs\nbogus_key: 1\nstate_dir: "+filepath.Join(b.Dir, "s1")+"\n", 0o600)
	_, e, c = run("--config", bad, "run", "--once")
	if c != 1 {
		t.Errorf("unknown key: exit %d, want 1", c)
	}
	oneLine("unknown key", e, "bogus_key", "line 3")

	sdk := filepath.Join(b.Dir, "sdk.yaml")
	testkit.WriteFile(t, sdk, "env_id: env-qa-02\nsite: cbs\ntransport: sdk\nidentity: "+filepath.Join(b.Dir, "no-such-identity.json")+
		"\nstate_dir: "+filepath.Join(b.Dir, "s2")+"\n", 0o600)
	_, e, c = run("--config", sdk, "run", "--once")
	if c != 1 {
		t.Errorf("transport sdk: exit %d, want 1", c)
	}
	if config.SDKBuiltIn {
		// the agent `make sdk` builds (testkit.BuildAgent in a -tags ziti test binary)
		oneLine("transport sdk", e, "transport sdk: IDENTITY_UNUSABLE: identity", "does not exist")
	} else {
		oneLine("transport sdk", e, "no OpenZiti SDK", "transport: proxy", "transport: system")
	}
	if !config.SDKBuiltIn {
		// the refused start is a tick explain names, with the same hint
		o, e, c = run("--config", sdk, "explain")
		if c != 0 || !strings.Contains(o, "SDK_UNAVAILABLE") || !strings.Contains(o, "transport: system") {
			t.Errorf("explain after a refused transport: exit %d\n%s%s", c, o, e)
		}
	}
}

// TestExitCodes walks the demo: apply 0, heartbeat 0, new release 0, rollback refused 1 (and
// remembered: the next tick exits 1 again without fetching the bundle), retire 0.
func TestExitCodes(t *testing.T) {
	b := startBox(t)
	b.Desire("v1")
	b.tick(0)
	if d := b.explainJSON(); d.State != "Reported" || d.Next != "converged" || d.Ticks[0].Action != "apply" {
		t.Errorf("after apply: %+v", d)
	}
	b.tick(0)
	if d := b.explainJSON(); d.Next != "converged" || d.Ticks[0].Action != "none" {
		t.Errorf("after heartbeat: %+v", d)
	}
	b.Desire("v2")
	b.tick(0)
	b.Desire("v1")
	e := b.tick(1)
	if !strings.Contains(e, "ROLLBACK_REFUSED") {
		t.Errorf("refused tick's stderr does not name the refusal:\n%s", e)
	}
	fetches := b.Counts().BundleFetches
	e = b.tick(1)
	if !strings.Contains(e, "ROLLBACK_REFUSED") {
		t.Errorf("second refused tick's stderr does not name the refusal:\n%s", e)
	}
	if got := b.Counts().BundleFetches; got != fetches {
		t.Errorf("a remembered refusal fetched the bundle again: fetches %d → %d", fetches, got)
	}
	if d := b.explainJSON(); d.State != "Refused" || !strings.Contains(d.Next, "ROLLBACK_REFUSED") {
		t.Errorf("after refusal: %+v", d)
	}
	b.Sim("retire", "--purge")
	b.tick(0)
	if got := b.DockerCalls("compose", "down"); got != 1 {
		t.Errorf("compose down calls = %d, want 1", got)
	}
}

// TestKillBetweenTransitions kills the agent with SIGKILL right before or right after a
// transition commits; the next plain tick must finish the apply with one lease, two logins
// (bootstrap + lease) and one applied report.
func TestKillBetweenTransitions(t *testing.T) {
	for _, tc := range []struct {
		point string
		ups   int // compose up calls in all: a kill before Up's commit replays it once
		// applied reports tenancy holds after the resumed tick. A kill between tenancy's
		// acknowledgement and the commit of Reported replays the report from the outbox (at
		// least once, never lost), and that tick, converged, is a heartbeat with its own report.
		applied int
	}{
		{"after:Leased", 1, 1},
		{"before:LoggedIn", 1, 1},
		{"after:Staged", 1, 1},
		{"before:Up", 2, 1},
		{"after:Up", 1, 1},
		{"before:Reported", 1, 3},
	} {
		t.Run(tc.point, func(t *testing.T) {
			b := startBox(t)
			b.Desire("v1")
			r := b.Run("monky-deployd", []string{"MONKY_DEPLOYD_FAILPOINT=" + tc.point},
				"--config", b.Config(), "run", "--once")
			if r.Sig != syscall.SIGKILL {
				t.Fatalf("failpoint %s: exit %d, signal %v; want death by SIGKILL; stderr:\n%s", tc.point, r.Code, r.Sig, r.Stderr)
			}
			b.tick(0)
			cn := b.Counts()
			if cn.Leases != 1 || cn.Logins != 2 {
				t.Errorf("leases %d, logins %d; want 1 and 2", cn.Leases, cn.Logins)
			}
			rs := b.Reports()
			if n := countResult(rs, "applied"); n != tc.applied || len(rs) != tc.applied {
				t.Errorf("applied reports = %d, want %d: %+v", n, tc.applied, rs)
			}
			if got := b.DockerCalls("compose", "up"); got != tc.ups {
				t.Errorf("compose up calls = %d, want %d", got, tc.ups)
			}
			if d := b.explainJSON(); d.State != "Reported" || d.Next != "converged" {
				t.Errorf("after the resumed tick: state %q next %q", d.State, d.Next)
			}
			// and the box is steady: a heartbeat asks for nothing more
			b.tick(0)
			if cn2 := b.Counts(); cn2.Leases != 1 || cn2.Logins != 2 {
				t.Errorf("after a heartbeat: leases %d, logins %d", cn2.Leases, cn2.Logins)
			}
		})
	}
}

// TestTwoTicksAtOnce holds the tick lock as a running tick would: a second tick exits 0 at
// once without checking in, and status/explain answer within a second.
func TestTwoTicksAtOnce(t *testing.T) {
	b := startBox(t)
	b.Desire("v1")
	b.tick(0)
	before := b.Counts().Checkins

	f, err := os.OpenFile(filepath.Join(b.StateDir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("flock: %v", err)
	}
	defer func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }()

	start := time.Now()
	b.tick(0)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a locked-out tick took %v", d)
	}
	if got := b.Counts().Checkins; got != before {
		t.Errorf("a locked-out tick checked in: %d → %d", before, got)
	}
	for _, args := range [][]string{{"status", "--json"}, {"explain", "--json"}} {
		start := time.Now()
		o, e, c := b.agent(args...)
		took := time.Since(start)
		if c != 0 {
			t.Errorf("%v while a tick runs: exit %d: %s", args, c, e)
			continue
		}
		if took > time.Second {
			t.Errorf("%v took %v while a tick runs", args, took)
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(o), &doc); err != nil {
			t.Errorf("%v: not one JSON document: %v\n%s", args, err, o)
		}
		if args[0] == "status" && doc["tick_running"] != true {
			t.Errorf("status --json while the lock is held: tick_running = %v", doc["tick_running"])
		}
	}
}

// TestCorruptStateFile: garbage in state.db is moved aside and the tick goes on.
func TestCorruptStateFile(t *testing.T) {
	b := startBox(t)
	b.Desire("v1")
	b.tick(0)
	garbage := bytes.Repeat([]byte("not a bbolt file \x00\xff"), 512)
	testkit.WriteFile(t, filepath.Join(b.StateDir, "state.db"), string(garbage), 0o600)
	b.tick(0)
	aside, _ := filepath.Glob(filepath.Join(b.StateDir, "state.db.corrupt-*"))
	if len(aside) != 1 {
		t.Fatalf("state.db.corrupt-* files: %v, want 1", aside)
	}
	if raw, _ := os.ReadFile(aside[0]); !bytes.Equal(raw, garbage) {
		t.Errorf("%s does not hold the corrupt bytes", aside[0])
	}
	if d := b.explainJSON(); d.State == "" {
		t.Errorf("explain after recovery: %+v", d)
	}
}

// TestTruncatedStateFile: a state.db cut to half its size crashed every command with SIGBUS.
// status and explain now say it is corrupt (exit 1, no signal); run moves it aside and starts
// afresh; status and explain then name the copy.
func TestTruncatedStateFile(t *testing.T) {
	b := startBox(t)
	b.Desire("v1")
	b.tick(0)
	for i := 0; i < 5; i++ {
		b.tick(0)
	}
	path := filepath.Join(b.StateDir, "state.db")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, path, string(raw[:len(raw)/2]), 0o600)
	for _, args := range [][]string{{"status"}, {"explain"}} {
		r := b.Run("monky-deployd", nil, append([]string{"--config", b.Config()}, args...)...)
		if r.Sig != 0 || r.Code != 1 || !strings.Contains(r.Stderr, "corrupt") || !strings.Contains(r.Stderr, "moves it aside") {
			t.Errorf("%v on a truncated file: exit %d, signal %v, stderr %q", args, r.Code, r.Sig, r.Stderr)
		}
	}
	// a copy of it is read as far as its bytes go, and says so
	if r := b.Run("monky-deployd", nil, "explain", "--state-file", path); r.Sig != 0 || r.Code != 0 ||
		!strings.Contains(r.Stdout, "is corrupt") || !strings.Contains(r.Stdout, "meta page") || !strings.Contains(r.Stdout, "truncated") {
		t.Errorf("explain --state-file on a truncated copy: exit %d, signal %v, stdout %q, stderr %q", r.Code, r.Sig, r.Stdout, r.Stderr)
	}
	b.tick(0)
	aside, _ := filepath.Glob(path + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("state.db.corrupt-* files: %v, want 1", aside)
	}
	for _, args := range [][]string{{"status"}, {"explain"}} {
		o, e, code := b.agent(args...)
		if code != 0 || !strings.Contains(o, aside[0]) || !strings.Contains(o, "truncated") {
			t.Errorf("%v after the move: exit %d, stdout %q, stderr %q", args, code, o, e)
		}
	}
}

// TestSecretCanary: no secret value, token or grant in anything the agent prints, stores or
// reports.
func TestSecretCanary(t *testing.T) {
	b := startBox(t)
	const dbCanary = "CANARY-db-7f3a9c21e4"
	// gemini is pinned to version 2 by the demo manifest: its value is the one the agent reads.
	const geminiPinned = "demo-gemini-key-2"
	b.Sim("secret", "--name", "db", "--key", "password", "--value", dbCanary)
	b.Desire("v1")
	b.tick(0)
	tokenRaw, err := os.ReadFile(filepath.Join(b.StateDir, "bao.token"))
	if err != nil {
		t.Fatalf("token file: %v", err)
	}
	token := strings.TrimSpace(string(tokenRaw))
	b.tick(0) // heartbeat
	b.Desire("v2")
	b.tick(0)
	for _, args := range [][]string{{"status"}, {"status", "--json"}, {"explain"}, {"explain", "--json"}} {
		if _, e, c := b.agent(args...); c != 0 {
			t.Errorf("%v: exit %d: %s", args, c, e)
		}
	}
	b.Sim("reports") // kept in b.Outputs

	needles := map[string]string{"db secret": dbCanary, "gemini secret": geminiPinned, "token": token, "grant": b.Grant}
	for name, n := range needles {
		if len(n) < 8 {
			t.Fatalf("%s is too short to scan for: %q", name, n)
		}
	}
	scan := func(where string, hay []byte) int {
		hits := 0
		for name, n := range needles {
			if c := bytes.Count(hay, []byte(n)); c > 0 {
				t.Errorf("%s: %d hit(s) of the %s", where, c, name)
				hits += c
			}
		}
		return hits
	}

	// Positive control: the rendered .env of the applied release holds the secrets (that is its
	// job), and the scanner finds them there.
	envs, _ := filepath.Glob(filepath.Join(b.StateDir, demoEnv, "releases", "*", ".env"))
	if len(envs) == 0 {
		t.Fatal("no rendered .env under the deploy dir")
	}
	found := 0
	for _, p := range envs {
		raw, _ := os.ReadFile(p)
		found += bytes.Count(raw, []byte(dbCanary))
	}
	if found == 0 {
		t.Fatalf("positive control: the canary is not in any rendered .env %v: the scan would prove nothing", envs)
	}

	hits := 0
	for i, o := range b.Outputs {
		hits += scan(fmt.Sprintf("output %d", i), []byte(o))
	}
	db, err := os.ReadFile(filepath.Join(b.StateDir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	hits += scan("state.db", db)
	if hits != 0 {
		t.Errorf("%d secret hits in %d outputs and state.db", hits, len(b.Outputs))
	}
}

// TestExplainReadsInPlainWords checks the key phrases of explain after a heartbeat, a retire,
// and a tick whose token was superseded by a re-revealed kit.
func TestExplainReadsInPlainWords(t *testing.T) {
	b := startBox(t)
	explainHas := func(when string, words ...string) {
		t.Helper()
		o, e, c := b.agent("explain", "-n", "1")
		if c != 0 {
			t.Fatalf("explain %s: exit %d: %s", when, c, e)
		}
		for _, w := range words {
			if !strings.Contains(o, w) {
				t.Errorf("explain %s lacks %q:\n%s", when, w, o)
			}
		}
	}
	b.Desire("v1")
	b.tick(0)
	b.tick(0)
	explainHas("after a heartbeat", "action none", "CheckedIn", "services healthy", "next:  converged")

	b.Sim("retire")
	b.tick(0)
	explainHas("after a retire", "action down", "compose down", "retired")

	b2 := startBox(t)
	b2.Desire("v1")
	b2.tick(0)
	b2.Sim("reveal", "--kit", filepath.Join(b2.Dir, "other-kit"))
	e := b2.tick(1)
	if !strings.Contains(e, "AGENT_UNAUTHENTICATED") {
		t.Errorf("unauthenticated tick's stderr:\n%s", e)
	}
	if _, err := os.Stat(filepath.Join(b2.StateDir, "bao.token")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused token is still on disk: %v", err)
	}
	checkins := b2.Counts().Checkins
	b = b2
	explainHas("after an unauthenticated tick", "AGENT_UNAUTHENTICATED", "re-run the install kit", "Blocked")
	// Blocked: the next tick exits 1 at once without touching the network.
	b2.tick(1)
	if got := b2.Counts().Checkins; got != checkins {
		t.Errorf("check-ins %d → %d: a blocked tick went to the network", checkins, got)
	}
}
