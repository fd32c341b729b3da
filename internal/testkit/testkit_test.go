package testkit

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	c := NewClock(Epoch)
	if !c.Now().Equal(Epoch) {
		t.Fatalf("now %v, want %v", c.Now(), Epoch)
	}
	c.Advance(time.Minute)
	if err := c.Sleep(t.Context(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := c.Now().Sub(Epoch); got != time.Hour+time.Minute {
		t.Errorf("moved %v, want 1h1m", got)
	}
}

func TestExecReportsTheExitCodeAndTheSignal(t *testing.T) {
	r, err := Exec(exec.Command("sh", "-c", "echo out; echo err >&2; exit 3"), -1)
	if err != nil || r.Code != 3 || r.Sig != 0 || r.Stdout != "out\n" || r.Stderr != "err\n" {
		t.Errorf("exit 3: %+v, %v", r, err)
	}
	r, err = Exec(exec.Command("sleep", "10"), 10*time.Millisecond)
	if err != nil || r.Sig != syscall.SIGKILL || r.Code != -1 {
		t.Errorf("killed: %+v, %v", r, err)
	}
	if _, err := Exec(exec.Command("/nonexistent/binary"), -1); err == nil {
		t.Error("a command that cannot start: no error")
	}
}

func TestBundleListsEveryOtherFileSorted(t *testing.T) {
	files := Bundle("env-qa-02", map[string]string{"compose.yaml": "services: {}\n", ".env.template": ""})
	if want := `{"env_id":"env-qa-02","files":[".env.template","compose.yaml"]}`; files["bundle.json"] != want {
		t.Errorf("bundle.json %s, want %s", files["bundle.json"], want)
	}
	tr := tar.NewReader(bytes.NewReader(Tar(t, TarFiles(files)...)))
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	if len(names) != 3 || names[0] != ".env.template" || names[1] != "bundle.json" || names[2] != "compose.yaml" {
		t.Errorf("archive entries %q", names)
	}
}

// toolTB records what Tool asks of its test.
type toolTB struct {
	testing.TB
	fatal string
}

func (r *toolTB) Helper()                   {}
func (r *toolTB) Log(...any)                {}
func (r *toolTB) Fatalf(f string, a ...any) { r.fatal = fmt.Sprintf(f, a...) }

func TestToolNamesASkippedCheckAndFailsWhenRequired(t *testing.T) {
	const missing = "monky-no-such-tool"
	if p := Tool(t, "sh", "dash", "a check"); p == "" {
		t.Fatal("Tool did not find sh")
	}
	log := filepath.Join(t.TempDir(), "skipped")
	t.Setenv(SkippedChecksEnv, log)
	t.Setenv(RequireToolsEnv, "")
	r := &toolTB{TB: t}
	if p := Tool(r, missing, "monky-pkg", "the check"); p != "" || r.fatal != "" {
		t.Fatalf("a missing tool: path %q, fatal %q", p, r.fatal)
	}
	raw, err := os.ReadFile(log)
	if err != nil || string(raw) != "the check: "+missing+" not installed (apt-get install monky-pkg)\n" {
		t.Errorf("the skipped checks file: %q, %v", raw, err)
	}
	t.Setenv(RequireToolsEnv, "1")
	r = &toolTB{TB: t}
	Tool(r, missing, "monky-pkg", "the check")
	if !strings.Contains(r.fatal, "the check is required") {
		t.Errorf("with %s=1 a missing tool fails: %q", RequireToolsEnv, r.fatal)
	}
	if raw2, _ := os.ReadFile(log); !bytes.Equal(raw2, raw) {
		t.Errorf("a required tool's miss was listed as skipped: %q", raw2)
	}
}
