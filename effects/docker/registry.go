package docker

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/failpoint"
)

// RegistryAuth is the registry pull credential (effects.RegistryAuth). Password is a secret:
// String never shows it.
type RegistryAuth = effects.RegistryAuth

// WriteDockerConfig is WriteDockerConfigFS on the real filesystem.
func WriteDockerConfig(dir string, a RegistryAuth) error {
	return WriteDockerConfigFS(files.OS, dir, a)
}

// WriteDockerConfigFS writes dir/config.json (0600) holding the credential, replacing any
// previous one atomically (temp file, fsync, rename, fsync dir); dir is created and kept
// 0700. Idempotent. Errors never carry the credential.
func WriteDockerConfigFS(fsys files.FS, dir string, a RegistryAuth) error {
	if a.Registry == "" || a.Username == "" {
		return errors.New("write docker config: credential has no registry or username")
	}
	if err := files.MkdirAllFS(fsys, dir, 0o700); err != nil {
		return fmt.Errorf("write docker config: %w", err)
	}
	if err := fsys.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("write docker config: %w", err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte(a.Username + ":" + a.Password))
	body, err := json.MarshalIndent(map[string]any{
		"auths": map[string]any{a.Registry: map[string]string{"auth": auth}},
	}, "", "  ")
	if err != nil {
		return errors.New("write docker config: encode failed")
	}
	return writeAtomic(fsys, filepath.Join(dir, "config.json"), append(body, '\n'), 0o600)
}

func writeAtomic(fsys files.FS, path string, body []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	tmp := filepath.Join(dir, ".config.json."+files.RandomSuffix())
	if err := fsys.WriteFile(tmp, body, mode); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("write docker config: %w", err)
	}
	if err := fsys.SyncFile(tmp); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("write docker config: %w", err)
	}
	failpoint.Hit("file:docker-config-tmp-synced")
	if err := fsys.Rename(tmp, path); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("write docker config: %w", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("write docker config: %w", err)
	}
	failpoint.Hit("file:docker-config-written")
	return nil
}
