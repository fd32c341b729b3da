// Package tools provides what the e2e suites (make e2e, make systemd-e2e) build and run around
// the agent: the docker compose v2 plugin of a given version, built once from the Go module proxy
// into a cache both suites share, and a command runner.
package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// CacheDir holds the compose plugins built once per version: $MONKY_E2E_CACHE, else
// <user cache dir>/monky-e2e.
func CacheDir() (string, error) {
	if d := os.Getenv("MONKY_E2E_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "monky-e2e"), nil
}

// ComposePlugin returns the path of the docker-compose plugin of version (<cache>/compose-<version>/
// docker-compose), building it from the module proxy when the cache lacks it: `go mod download`
// the module, then `go build ./cmd` inside its directory (compose's go.mod has exclude lines, so
// `go install` refuses it). The plugin is static (CGO_ENABLED=0).
func ComposePlugin(version string) (string, error) {
	dir, err := CacheDir()
	if err != nil {
		return "", fmt.Errorf("compose %s: %w", version, err)
	}
	out := filepath.Join(dir, "compose-"+version, "docker-compose")
	if fi, err := os.Stat(out); err == nil && fi.Mode()&0o111 != 0 {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("compose %s: %w", version, err)
	}
	raw, err := Run("", nil, "go", "mod", "download", "-json", "github.com/docker/compose/v2@"+version)
	if err != nil {
		return "", fmt.Errorf("compose %s: go mod download: %w", version, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal([]byte(raw), &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("compose %s: go mod download answered no Dir: %s", version, raw)
	}
	tmp := out + ".tmp"
	ld := "-s -w -X github.com/docker/compose/v2/internal.Version=" + version
	fmt.Fprintf(os.Stderr, "e2e: building the compose plugin %s (once; cached in %s)\n", version, filepath.Dir(out))
	if _, err := Run(mod.Dir, []string{"CGO_ENABLED=0", "GOFLAGS=-mod=mod"}, "go", "build", "-trimpath",
		"-ldflags", ld, "-o", tmp, "./cmd"); err != nil {
		return "", fmt.Errorf("compose %s: build: %w", version, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("compose %s: %w", version, err)
	}
	return out, nil
}

// Run runs name args in dir with extra environment and returns stdout; the error carries stderr.
func Run(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		return o.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(e.String()))
	}
	return o.String(), nil
}
