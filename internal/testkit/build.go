package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
)

// builds holds the binaries built by this process, in one temp directory.
var builds struct {
	mu   sync.Mutex
	dir  string
	done map[string]string // name → the go build arguments it was built with
}

// Root is the module's root directory (where go.mod is).
func Root() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..")
}

// BinDir is the directory Build writes to; "" before the first Build. A TestMain may keep
// there what its tests share (test/robust keeps its releases); Run removes it all.
func BinDir() string {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	return builds.dir
}

// Bin is the path of the binary Build built as name.
func Bin(name string) string { return filepath.Join(BinDir(), name) }

func binDirLocked() (string, error) {
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "monky-testkit-")
		if err != nil {
			return "", err
		}
		builds.dir, builds.done = dir, map[string]string{}
	}
	return builds.dir, nil
}

// Build builds the main package pkg (a path below the module root, such as "./cmd/monky-sim")
// with the go build flags given, as BinDir/name with CGO_ENABLED=0, and returns its path. A
// name is built once per process: asking again with the same flags returns the path at once,
// with other flags is an error.
func Build(name, pkg string, flags ...string) (string, error) {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	dir, err := binDirLocked()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	key := strings.Join(args, " ")
	if prev, ok := builds.done[name]; ok {
		if prev != key {
			return "", fmt.Errorf("testkit: %s is built already, as go %s", name, prev)
		}
		return out, nil
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = Root()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if raw, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", key, err, raw)
	}
	builds.done[name] = key
	return out, nil
}

// BuildAgent builds the agent as the package ships it — `make agent`, the recipe of `make build`
// and of the .deb's /usr/bin/monky-deployd — as BinDir/monky-deployd, and returns its path.
// version, when not empty, is the version it reports (make's VERSION). Built once per process.
//
// Where $MONKY_AGENT_DIR (AgentDirEnv) holds the agent built so already — monky-deployd for the
// tree's own version, monky-deployd-<version> for another — that binary is taken instead of
// linking it again: .ci/run builds the agent once for every suite.
func BuildAgent(version string) (string, error) {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	dir, err := binDirLocked()
	if err != nil {
		return "", err
	}
	const name = "monky-deployd"
	args := []string{"--no-print-directory", "agent", "BIN=" + dir}
	if zitiBuild() {
		// a test binary built with -tags ziti (make sdk-test) tests the agent `make sdk` builds
		args = []string{"--no-print-directory", "sdk", "SDK_BIN=" + filepath.Join(dir, name)}
	}
	if version != "" {
		args = append(args, "VERSION="+version)
	}
	key := "make " + strings.Join(args[1:], " ")
	if prev, ok := builds.done[name]; ok {
		if prev != key {
			return "", fmt.Errorf("testkit: %s is built already, as %s", name, prev)
		}
		return filepath.Join(dir, name), nil
	}
	out := filepath.Join(dir, name)
	if prebuilt := prebuiltAgent(version); prebuilt != "" && !zitiBuild() {
		if err := copyExecutable(prebuilt, out); err != nil {
			return "", fmt.Errorf("testkit: the agent of %s: %w", AgentDirEnv, err)
		}
		builds.done[name] = key
		return out, nil
	}
	cmd := exec.Command("make", args...)
	cmd.Dir = Root()
	if raw, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %v\n%s", key, err, raw)
	}
	builds.done[name] = key
	return out, nil
}

// AgentDirEnv names a directory of agents built by `make agent` (.ci/run's): BuildAgent takes
// its monky-deployd (or monky-deployd-<version>) instead of building one.
const AgentDirEnv = "MONKY_AGENT_DIR"

// prebuiltAgent is the path of the agent of version in $MONKY_AGENT_DIR, or "" when there is none.
func prebuiltAgent(version string) string {
	dir := os.Getenv(AgentDirEnv)
	if dir == "" {
		return ""
	}
	name := "monky-deployd"
	if version != "" {
		name += "-" + version
	}
	p := filepath.Join(dir, name)
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return p
}

// copyExecutable copies the regular file src to dst with mode 0755.
func copyExecutable(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// zitiBuild reports whether this test binary was built with -tags ziti.
func zitiBuild() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), "ziti") {
				return true
			}
		}
	}
	return false
}

const fakeDockerPkg = "./test/fakedocker"

// FakeDocker is the path of the recording docker stub (test/fakedocker), built as
// "docker" on first use.
func FakeDocker(tb testing.TB) string {
	tb.Helper()
	p, err := Build("docker", fakeDockerPkg)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// FakeDockerFor writes a `docker` of the test's own that runs the docker stub with its log
// and state directory set (the agent hands docker no variable of its own environment) and
// returns its path.
func FakeDockerFor(tb testing.TB, log, state string) string {
	tb.Helper()
	return FakeDockerWrapper(tb, tb.TempDir(), log, state)
}

// FakeDockerWrapper writes dir/docker, a script that runs the docker stub with
// FAKE_DOCKER_LOG=log and FAKE_DOCKER_STATE=state, and returns its path.
func FakeDockerWrapper(tb testing.TB, dir, log, state string) string {
	tb.Helper()
	p := filepath.Join(dir, "docker")
	script := "#!/bin/sh\nFAKE_DOCKER_LOG=" + shellQuote(log) + " FAKE_DOCKER_STATE=" + shellQuote(state) +
		" exec " + shellQuote(FakeDocker(tb)) + " \"$@\"\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		tb.Fatal(err)
	}
	return p
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Run runs setup (when not nil), then the tests of m, removes what Build built and returns
// the exit code for os.Exit. A setup error is printed and ends the run before any test.
func Run(m *testing.M, setup func() error) int {
	defer removeBuilds()
	if setup != nil {
		if err := setup(); err != nil {
			fmt.Fprintln(os.Stderr, "setup:", err)
			return 1
		}
	}
	return m.Run()
}

// Main runs the tests of m as Run does, without a setup, and exits.
func Main(m *testing.M) { os.Exit(Run(m, nil)) }

func removeBuilds() {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
		builds.dir, builds.done = "", nil
	}
}
