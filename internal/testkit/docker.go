package testkit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DockerCall is one call the docker stub recorded in its FAKE_DOCKER_LOG.
type DockerCall struct {
	Argv             []string `json:"argv"`
	Dir              string   `json:"dir"`
	DockerConfig     string   `json:"docker_config"`
	InteractiveNoCLI string   `json:"interactive_no_cli"`
	ComposeEnv       []string `json:"compose_env"`
	APIKeySet        bool     `json:"api_key_set"`
	// Env is every name of docker's environment (the stub's own FAKE_DOCKER_* left out).
	Env []string `json:"env"`
	// Files is the content of each -f file when the call was made, by path.
	Files map[string]string `json:"files"`
}

// Line is the call's argv joined by spaces.
func (c DockerCall) Line() string { return strings.Join(c.Argv, " ") }

// Has reports whether the call's argv holds every word of sub, in order.
func (c DockerCall) Has(sub ...string) bool {
	i := 0
	for _, a := range c.Argv {
		if i < len(sub) && a == sub[i] {
			i++
		}
	}
	return i == len(sub)
}

// DockerCalls reads the calls the docker stub recorded in log, oldest first; none when it
// has not written the file yet. A line that is not a call fails the test.
func DockerCalls(tb testing.TB, log string) []DockerCall {
	tb.Helper()
	raw, err := os.ReadFile(log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	var out []DockerCall
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var c DockerCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			tb.Fatalf("%s: %q: %v", log, sc.Text(), err)
		}
		out = append(out, c)
	}
	return out
}

// CountDockerCalls counts the calls of log whose argv holds every word of sub, in order.
func CountDockerCalls(tb testing.TB, log string, sub ...string) int {
	tb.Helper()
	n := 0
	for _, c := range DockerCalls(tb, log) {
		if c.Has(sub...) {
			n++
		}
	}
	return n
}

// SetDockerKnob writes the knob file name of the docker stub whose FAKE_DOCKER_STATE is
// state (see test/fakedocker for the knobs), or removes it when content is "".
func SetDockerKnob(tb testing.TB, state, name, content string) {
	tb.Helper()
	p := filepath.Join(state, name)
	if content == "" {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			tb.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}
