package sim

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// WriteKit writes an install kit into dir: dir/config.yaml (transport system, tenancy.base_url,
// the bao addr and mounts, bootstrap_path dir/bootstrap.jwt, state_dir (dir/state unless k
// names one), deploy_dir, docker_bin, log_level) and dir/bootstrap.jwt (0600) holding a fresh
// RevealKit grant, which supersedes every earlier grant of the env.
func (s *Sim) WriteKit(dir string, k Kit) error {
	if k.EnvID == "" {
		return fmt.Errorf("write kit: env_id is required")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("write kit: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return fmt.Errorf("write kit: %w", err)
	}
	if k.Site == "" {
		k.Site = "sim"
	}
	if k.LogLevel == "" {
		k.LogLevel = "INFO"
	}
	if k.StateDir == "" {
		k.StateDir = filepath.Join(abs, "state")
	}
	q := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	var b strings.Builder
	fmt.Fprintf(&b, "# Install kit written by monky-sim for %s.\n", k.EnvID)
	fmt.Fprintf(&b, "env_id: %s\nsite: %s\ntransport: system\n", q(k.EnvID), q(k.Site))
	fmt.Fprintf(&b, "tenancy:\n  base_url: %s\n", q(k.TenancyURL))
	fmt.Fprintf(&b, "bao:\n  addr: %s\n  auth_mount: %s\n  role: %s\n  kv_mount: %s\n",
		q(k.BaoURL), q(s.opts.AuthMount), q(s.opts.Role), q(s.opts.KVMount))
	if k.IntervalS > 0 {
		fmt.Fprintf(&b, "interval_s: %d\n", k.IntervalS)
	}
	fmt.Fprintf(&b, "bootstrap_path: %s\n", q(filepath.Join(abs, "bootstrap.jwt")))
	fmt.Fprintf(&b, "state_dir: %s\n", q(k.StateDir))
	if k.DeployDir != "" {
		fmt.Fprintf(&b, "deploy_dir: %s\n", q(k.DeployDir))
	}
	if k.DockerBin != "" {
		fmt.Fprintf(&b, "docker_bin: %s\n", q(k.DockerBin))
	}
	fmt.Fprintf(&b, "log_level: %s\n", q(k.LogLevel))

	grant, err := s.RevealKit(k.EnvID)
	if err != nil {
		return fmt.Errorf("write kit: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(abs, "bootstrap.jwt"), []byte(grant+"\n"), 0o600); err != nil {
		return fmt.Errorf("write kit: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(abs, "config.yaml"), []byte(b.String()), 0o640); err != nil {
		return fmt.Errorf("write kit: %w", err)
	}
	return nil
}

// writeFileAtomic replaces name with data: temp file, fsync, rename, fsync the directory.
func writeFileAtomic(name string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(name)
	f, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temp: %w", err)
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }()
	if err := f.Chmod(mode); err != nil {
		_ = f.Close()
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir: %w", err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir: %w", err)
	}
	return nil
}

// WriteFileAtomic is writeFileAtomic for the monky-sim command (the addr file).
func WriteFileAtomic(name string, data []byte, mode os.FileMode) error {
	return writeFileAtomic(name, data, mode)
}
