package main

// Helpers of the operator's-signals tests: the agent run as systemd runs it (stderr a journal
// stream), faults planted in the simulator and the docker stub, a release the agent refuses.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// journal runs the agent with stderr on a file that JOURNAL_STREAM names, as under systemd,
// and returns the exit code and the stderr lines.
func (b *box) journal(args ...string) (int, []string) {
	b.t.Helper()
	f, err := os.CreateTemp(b.dir, "journal-*")
	if err != nil {
		b.t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		b.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "monky-deployd"), append([]string{"--config", b.config()}, args...)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FAKE_DOCKER_LOG="+b.dockerLg, "FAKE_DOCKER_STATE="+b.dockerSt,
		"MONKY_DEPLOYD_CONFIG=", "MONKY_DEPLOYD_FAILPOINT=", fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino))
	cmd.Stderr = f
	var out bytes.Buffer
	cmd.Stdout = &out
	code := 0
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			b.t.Fatalf("%v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	raw, err := os.ReadFile(f.Name())
	if err != nil {
		b.t.Fatal(err)
	}
	b.outputs = append(b.outputs, out.String(), string(raw))
	s := strings.TrimRight(string(raw), "\n")
	if s == "" {
		return code, nil
	}
	return code, strings.Split(s, "\n")
}

// fail plants a fault rule in the simulator (see sim.FailRule); clearFails removes them all.
func (b *box) fail(rule string) { b.admin("/admin/fail", rule) }

func (b *box) clearFails() { b.admin("/admin/clear-fails", "{}") }

func (b *box) admin(path, body string) {
	b.t.Helper()
	raw, err := os.ReadFile(b.addrFile)
	if err != nil {
		b.t.Fatal(err)
	}
	var addrs struct{ Admin string }
	if err := json.Unmarshal(raw, &addrs); err != nil {
		b.t.Fatal(err)
	}
	base := addrs.Admin
	if !strings.HasPrefix(base, "http") {
		base = "http://" + base
	}
	resp, err := http.Post(strings.TrimRight(base, "/")+path, "application/json", strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.t.Fatalf("%s %s: %s", path, body, resp.Status)
	}
}

// dockerKnob writes (content) or removes ("" ) a knob file of the docker stub.
func (b *box) dockerKnob(name, content string) {
	b.t.Helper()
	p := filepath.Join(b.dockerSt, name)
	if content == "" {
		_ = os.Remove(p)
		return
	}
	writeFile(b.t, p, content)
}

// releasesWithPrivileged copies the demo releases and adds v3: v2 with a privileged api.
func releasesWithPrivileged(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "releases")
	if err := os.CopyFS(dir, os.DirFS("../../testdata/demo")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "v3"), os.DirFS(filepath.Join(dir, "v2"))); err != nil {
		t.Fatal(err)
	}
	compose := filepath.Join(dir, "v3", "compose.yaml")
	raw, err := os.ReadFile(compose)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(raw), "  api:\n", "  api:\n    privileged: true\n", 1)
	if s == string(raw) {
		t.Fatal("v2's compose.yaml has no api service")
	}
	if err := os.WriteFile(compose, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			_ = os.Chmod(p, map[bool]os.FileMode{true: 0o755, false: 0o644}[d.IsDir()])
		}
		return nil
	})
	return dir
}
