package main

// Helpers of the operator's-signals tests: the agent run as systemd runs it (stderr a journal
// stream), faults planted in the simulator and the docker stub, a release the agent refuses.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tikali/monky-deployd/internal/testkit"
)

// journal runs the agent with stderr on a file that JOURNAL_STREAM names, as under systemd,
// and returns the exit code and the stderr lines.
func (b *box) journal(args ...string) (int, []string) {
	b.T.Helper()
	f, err := os.CreateTemp(b.Dir, "journal-*")
	if err != nil {
		b.T.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		b.T.Fatal(err)
	}
	cmd := b.Command("monky-deployd", append([]string{"--config", b.Config()}, args...)...)
	cmd.Env = append(cmd.Env, fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino))
	cmd.Stderr = f
	var out bytes.Buffer
	cmd.Stdout = &out
	code := 0
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			b.T.Fatalf("%v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	raw, err := os.ReadFile(f.Name())
	if err != nil {
		b.T.Fatal(err)
	}
	b.Outputs = append(b.Outputs, out.String(), string(raw))
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
	b.T.Helper()
	raw, err := os.ReadFile(b.AddrFile)
	if err != nil {
		b.T.Fatal(err)
	}
	var addrs struct{ Admin string }
	if err := json.Unmarshal(raw, &addrs); err != nil {
		b.T.Fatal(err)
	}
	base := addrs.Admin
	if !strings.HasPrefix(base, "http") {
		base = "http://" + base
	}
	resp, err := http.Post(strings.TrimRight(base, "/")+path, "application/json", strings.NewReader(body))
	if err != nil {
		b.T.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.T.Fatalf("%s %s: %s", path, body, resp.Status)
	}
}

// releasesWithPrivileged copies the demo releases and adds v3: v2 with a privileged api.
func releasesWithPrivileged(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "releases")
	demo := filepath.Join(testkit.Root(), "testdata", "demo")
	if err := testkit.CopyTree(dir, demo, nil); err != nil {
		t.Fatal(err)
	}
	err := testkit.CopyTree(filepath.Join(dir, "v3"), filepath.Join(demo, "v2"), func(rel string, raw []byte) ([]byte, error) {
		if rel != "compose.yaml" {
			return raw, nil
		}
		s := strings.Replace(string(raw), "  api:\n", "  api:\n    privileged: true\n", 1)
		if s == string(raw) {
			return nil, errors.New("v2's compose.yaml has no api service")
		}
		return []byte(s), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
