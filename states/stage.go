package states

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/docker"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/failpoint"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/machine"
)

// stepStage: LoggedIn → Staged | Failed. Read the manifest's secrets (pinned versions), write
// the registry credential to the agent's own DOCKER_CONFIG, render .env (0600) into a staging
// directory, promote it to releases/<sha> by a rename and swap `current` atomically.
//
// Idempotent: a release directory of the same sha is replaced whole; `current` always points
// at a complete release.
func (a *Agent) stepStage(ctx context.Context) error {
	started := a.Now()
	b, err := a.currentBundle(ctx)
	if err != nil {
		return a.resumeBundleError(ctx, machine.LoggedIn, err)
	}
	man, err := b.Manifest()
	if err != nil {
		return a.fail(ctx, machine.LoggedIn, bundle.CodeInvalid, err.Error(), false)
	}
	values := map[string]string{}
	var names []string
	registry := false
	for _, e := range man.Entries {
		key := e.Key
		if key == "" {
			key = bundle.DefaultKey
		}
		version := 0
		if e.Version != nil {
			version = *e.Version
		}
		v, err := a.readKV(ctx, e.Path, key, version)
		if err != nil {
			if effects.IsTemporary(err) || a.isBlocked() || untrusted(err) {
				return err
			}
			return a.fail(ctx, machine.LoggedIn, codeOr(err, "SECRET_READ_FAILED"), fmt.Sprintf("read %s from %s: %s", e.Label(), e.Path, redact.String(err.Error())), false)
		}
		redact.Add(v)
		if e.Use == bundle.UseRegistryAuth {
			auth, err := docker.ParseRegistryAuth(v, a.Cfg.RegistryHost)
			if err != nil {
				return a.fail(ctx, machine.LoggedIn, "REGISTRY_AUTH_INVALID", fmt.Sprintf("registry credential at %s: %s", e.Path, redact.String(err.Error())), false)
			}
			redact.Add(auth.Password)
			if err := docker.WriteDockerConfigFS(a.fs(), a.Cfg.DockerConfigDir(), auth); err != nil {
				return a.fail(ctx, machine.LoggedIn, "STAGE_FAILED", redact.String(err.Error()), false)
			}
			registry = true
			continue
		}
		values[e.Var] = v
		names = append(names, e.Var)
	}
	env, err := bundle.Render(b.Files[bundle.TemplateFile], values)
	clear(values)
	if err != nil {
		return a.fail(ctx, machine.LoggedIn, bundle.CodeEnvIncomplete, redact.String(err.Error()), false)
	}
	if err := a.promote(b, env); err != nil {
		return a.fail(ctx, machine.LoggedIn, "STAGE_FAILED", redact.String(err.Error()), false)
	}
	sort.Strings(names)
	detail := fmt.Sprintf("read %d secret(s): %s", len(names), strings.Join(names, ", "))
	switch {
	case registry:
		detail += "; registry credential written to " + a.Cfg.DockerConfigDir() + "/config.json"
	case a.exists(a.Cfg.DockerConfigDir() + "/config.json"):
		detail += "; no registry-auth entry: the registry credential already in " + a.Cfg.DockerConfigDir() + "/config.json is kept"
	}
	detail += fmt.Sprintf("; release %s promoted, current → releases/%s", short(b.Sha), short(b.Sha))
	return a.eng.Fire(machine.Outcome{Event: machine.EvStage, Detail: detail}, started)
}

// promote writes the bundle and its .env into a staging directory under deploy_dir, renames
// it to releases/<sha> and points `current` at it. Every file and directory is fsynced
// before the renames that publish them.
func (a *Agent) promote(b *bundle.Bundle, env []byte) error {
	deploy := a.Cfg.DeployDir
	releases := filepath.Join(deploy, "releases")
	fsys := a.fs()
	if err := files.MkdirAllFS(fsys, releases, 0o700); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	staging := filepath.Join(deploy, ".staging-"+short(b.Sha)+"-"+files.RandomSuffix())
	if err := fsys.Mkdir(staging, 0o700); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = fsys.RemoveAll(staging)
		}
	}()
	dirs := map[string]bool{staging: true}
	for _, d := range b.Dirs {
		p := filepath.Join(staging, d)
		if err := files.MkdirAllFS(fsys, p, 0o755); err != nil {
			return fmt.Errorf("stage: %w", err)
		}
		dirs[p] = true
	}
	for name, data := range b.Files {
		p := filepath.Join(staging, name)
		if err := files.MkdirAllFS(fsys, filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("stage: %w", err)
		}
		dirs[filepath.Dir(p)] = true
		if err := writeSynced(fsys, p, data, 0o644); err != nil {
			return err
		}
	}
	if err := writeSynced(fsys, filepath.Join(staging, ".env"), env, 0o600); err != nil {
		return err
	}
	for d := range dirs {
		if err := files.SyncDirFS(fsys, d); err != nil {
			return err
		}
	}
	failpoint.Hit("file:stage-written")
	rel := filepath.Join(releases, b.Sha)
	var trash string
	if _, err := fsys.Lstat(rel); err == nil {
		trash = filepath.Join(deploy, ".trash-"+files.RandomSuffix())
		if err := fsys.Rename(rel, trash); err != nil {
			return fmt.Errorf("stage: %w", err)
		}
		failpoint.Hit("file:release-trashed")
	}
	if err := fsys.Rename(staging, rel); err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	ok = true
	failpoint.Hit("file:release-renamed")
	if err := files.SyncDirFS(fsys, releases); err != nil {
		return err
	}
	failpoint.Hit("file:releases-synced")
	if trash != "" {
		_ = fsys.RemoveAll(trash)
	}
	if err := files.ReplaceSymlinkFS(fsys, filepath.Join("releases", b.Sha), a.currentDir()); err != nil {
		return err
	}
	failpoint.Hit("file:current-swapped")
	return nil
}

func writeSynced(fsys files.FS, path string, data []byte, perm os.FileMode) error {
	if err := fsys.WriteFile(path, data, perm); err != nil {
		return fmt.Errorf("stage %s: %w", filepath.Base(path), err)
	}
	if err := fsys.SyncFile(path); err != nil {
		return fmt.Errorf("stage %s: %w", filepath.Base(path), err)
	}
	return nil
}

// cleanLeftovers removes what an interrupted tick left behind: staging and trash directories
// and temp links under deploy_dir, and the temp copies of the token, the grant and the docker
// config under state_dir (they hold secrets: they must not outlive the kill that left them).
func (a *Agent) cleanLeftovers() {
	sweep := func(dir string, match func(string) bool) {
		entries, err := a.fs().ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			if match(e.Name()) {
				_ = a.fs().RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
	sweep(a.Cfg.DeployDir, func(n string) bool {
		return strings.HasPrefix(n, ".staging-") || strings.HasPrefix(n, ".trash-") || strings.HasPrefix(n, ".current.tmp-")
	})
	sweep(a.Cfg.StateDir, func(n string) bool {
		return strings.HasPrefix(n, ".") && strings.Contains(n, ".tmp-") && n != ".state.db"
	})
	sweep(a.Cfg.DockerConfigDir(), func(n string) bool { return strings.HasPrefix(n, ".config.json.") })
}

// removeCurrent drops the `current` link after a retire.
func removeCurrent(fsys files.FS, link string) error {
	if _, err := fsys.Lstat(link); err != nil {
		return nil
	}
	return files.RemoveFS(fsys, link)
}

// exists reports whether path is there (not following a last symlink), through the file seam.
func (a *Agent) exists(path string) bool {
	_, err := a.fs().Lstat(path)
	return err == nil
}
