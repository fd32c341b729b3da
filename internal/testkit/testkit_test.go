package testkit

import (
	"archive/tar"
	"bytes"
	"os/exec"
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
