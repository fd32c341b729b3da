package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// TestDemo runs `make demo`'s script (scripts/demo.sh) with the binaries TestMain built and the
// recording docker stub, and checks what a newcomer reads: an apply that converges, the
// refused rollback, the retire taking the services down, and the closing line.
func TestDemo(t *testing.T) {
	testkit.Heavy(t, "make test-heavy", "the demo builds the docker stub and runs the simulator and five ticks")
	cmd := exec.Command("bash", "../../test/demo.sh")
	env := []string{"MONKY_DEMO_BIN=" + testkit.BinDir()}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MONKY_DEMO_") && !strings.HasPrefix(kv, "FAKE_DOCKER_") && !strings.HasPrefix(kv, "MONKY_DEPLOYD_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("demo.sh: %v after %v\n%s", err, took, out)
	}
	s := string(out)
	for _, w := range []string{
		"using the recording docker stub",
		"next:  converged",
		"ROLLBACK_REFUSED",
		"run --once exit code: 1 (expected)",
		"compose down",
		"retired: nothing runs",
		"wall time:",
		"demo finished",
	} {
		if !strings.Contains(s, w) {
			t.Errorf("demo output lacks %q", w)
		}
	}
	if strings.Contains(s, "(expected 0)") || strings.Contains(s, "(expected 1)") {
		t.Errorf("demo saw an unexpected exit code")
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", s)
	}
	if took > 60*time.Second {
		t.Errorf("demo took %v, want under a minute", took)
	}
}
