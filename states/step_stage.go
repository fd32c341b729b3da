package states

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/failpoint"
	"github.com/tikali/monky-deployd/internal/model"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/internal/vocab"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/states/credential"
	"github.com/tikali/monky-deployd/store"
)

// stepStage: LoggedIn → Staged | Failed. Read the manifest's secrets (pinned versions), write
// the registry credential to the agent's own DOCKER_CONFIG, render .env (0600) into a staging
// directory, promote it to releases/<sha> by a rename and swap `current` atomically.
//
// Idempotent: a release directory of the same sha is replaced whole; `current` always points
// at a complete release.
func (tk *tick) stepStage(ctx context.Context) error {
	started := tk.Now()
	b, err := tk.currentBundle(ctx)
	if err != nil {
		return tk.resumeBundleError(ctx, machine.LoggedIn, err)
	}
	man, err := b.Manifest()
	if err != nil {
		return tk.failBecause(ctx, machine.LoggedIn, vocab.BundleInvalid, effects.ReasonOf(err), err.Error(), false)
	}
	values, names, registry, ended, err := tk.readSecrets(ctx, man)
	if ended {
		return err
	}
	env, err := bundle.Render(b.Files[bundle.TemplateFile], values)
	clear(values)
	if err != nil {
		return tk.failBecause(ctx, machine.LoggedIn, vocab.EnvIncomplete, effects.ReasonOf(err), err.Error(), false)
	}
	err = tk.promote(b, env, func(rel string) error { return tk.writeModel(ctx, b, env, rel) })
	clear(env)
	var mr *modelRefused
	switch {
	case errors.As(err, &mr):
		return tk.failBecause(ctx, machine.LoggedIn, mr.code, mr.reason, mr.detail, false)
	case err != nil:
		return tk.failBecause(ctx, machine.LoggedIn, codeOr(err, vocab.StageFailed), effects.ReasonOf(err), err.Error(), false)
	}
	sort.Strings(names)
	detail := fmt.Sprintf("read %d secret(s): %s", len(names), strings.Join(names, ", "))
	switch {
	case registry:
		detail += "; registry credential written to " + tk.Cfg.DockerConfigDir() + "/config.json"
	case tk.exists(tk.Cfg.DockerConfigDir() + "/config.json"):
		detail += "; no registry-auth entry: the registry credential already in " + tk.Cfg.DockerConfigDir() + "/config.json is kept"
	}
	detail += fmt.Sprintf("; release %s promoted, its model checked and resolved, current → releases/%s", machine.ShortSha(b.Sha), machine.ShortSha(b.Sha))
	consent := b.Meta.Agent.RevertOnFailure
	if consent {
		detail += "; the bundle consents to a revert on failure"
	}
	return tk.eng.Fire(machine.Outcome{Event: machine.EvStage, Detail: detail, Update: func(r *store.Record, _ store.Tx) error {
		r.RevertOnFailure = consent
		return nil
	}}, started)
}

// readSecrets reads the manifest's secrets (pinned versions): the .env's values by variable,
// their names, and whether a registry credential was written to the agent's DOCKER_CONFIG.
// ended: the step ends here, with err (a failure of the apply is committed as such).
func (tk *tick) readSecrets(ctx context.Context, man bundle.Manifest) (values map[string]string, names []string, registry, ended bool, err error) {
	values = map[string]string{}
	for _, e := range man.Entries {
		key := e.Key
		if key == "" {
			key = bundle.DefaultKey
		}
		version := 0
		if e.Version != nil {
			version = *e.Version
		}
		v, err := tk.readKV(ctx, e.Path, key, version)
		if err != nil {
			if effects.IsTemporary(err) || tk.isBlocked() || untrusted(err) {
				return nil, nil, false, true, err
			}
			tk.failSubject = e.Path // the fix line names the secret
			return nil, nil, false, true, tk.failBecause(ctx, machine.LoggedIn, codeOr(err, vocab.SecretReadFailed), effects.ReasonOf(err), fmt.Sprintf("read %s from %s: %s", e.Label(), e.Path, err.Error()), false)
		}
		redact.Add(v)
		if e.Use == bundle.UseRegistryAuth {
			auth, err := effects.ParseRegistryAuth(v, tk.Cfg.RegistryHost)
			if err != nil {
				return nil, nil, false, true, tk.failBecause(ctx, machine.LoggedIn, vocab.RegistryAuthInvalid, effects.ReasonOf(err), fmt.Sprintf("registry credential at %s: %s", e.Path, err.Error()), false)
			}
			redact.Add(auth.Password)
			if err := tk.Fx.Compose.WriteDockerConfig(tk.fs(), tk.Cfg.DockerConfigDir(), auth); err != nil {
				return nil, nil, false, true, tk.failBecause(ctx, machine.LoggedIn, vocab.StageFailed, effects.ReasonOf(err), err.Error(), false)
			}
			registry = true
			continue
		}
		values[e.Var] = v
		names = append(names, e.Var)
	}
	return values, names, registry, false, nil
}

// modelRefused is a model compose would run that the stage refuses: the policy's findings
// (PRIVILEGED_REFUSED) or a compose file that does not load with the secrets' values.
type modelRefused struct {
	code   vocab.Code
	reason vocab.Reason // vocab.ReasonUnlistedField: the policy refused only unlisted fields
	detail string
}

func (e *modelRefused) Error() string { return string(e.code) + ": " + e.detail }

// writeModel is the authoritative check: the release written at rel is verified again, its
// compose file is loaded as compose would load it (its files, the rendered .env, no process
// environment), the policy decides on that model, and the resolved model is written 0600 to
// <deploy_dir>/resolved/<sha>.yaml (beside an empty env file) for every compose call to run
// alone. The load, the policy and the resolution run in a bounded child (checkmodel.go). The
// check before the lease stays: it refuses early, on placeholders.
func (tk *tick) writeModel(ctx context.Context, b *bundle.Bundle, env []byte, rel string) error {
	if err := tk.Fx.Compose.VerifyRelease("stage", rel); err != nil {
		return err
	}
	resolved, services, err := resolveModel(ctx, b, env, rel, tk.Cfg.ComposeProject)
	if err != nil {
		return err
	}
	defer clear(resolved)
	fsys := tk.fs()
	dir := filepath.Dir(model.ModelPath(rel))
	if err := files.MkdirAllFS(fsys, dir, 0o700); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	if err := files.CheckDir(dir); err != nil {
		return err // trusted like deploy_dir before a secret is written into it
	}
	if err := fsys.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	if err := files.WriteAtomicFS(fsys, model.EmptyEnvPath(rel), nil, 0o600); err != nil {
		return err
	}
	if services != nil {
		js, err := json.Marshal(services)
		if err != nil {
			return err
		}
		if err := files.WriteAtomicFS(fsys, model.ServicesPath(rel), js, 0o600); err != nil {
			return err
		}
	}
	if err := files.WriteAtomicFS(fsys, model.ModelPath(rel), resolved, 0o600); err != nil {
		return err
	}
	failpoint.Hit("file:model-written")
	return nil
}

// promote writes the bundle and its .env into a staging directory under deploy_dir, renames
// it to releases/<sha>, runs ready on it and points `current` at it. Every file and directory
// is fsynced before the renames that publish them. When ready fails, `current` is left as it
// was.
func (tk *tick) promote(b *bundle.Bundle, env []byte, ready func(rel string) error) error {
	releases := filepath.Join(tk.Cfg.DeployDir, "releases")
	fsys := tk.fs()
	staging, err := tk.newStaging(fsys, b, env, releases)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			_ = fsys.RemoveAll(staging)
		}
	}()
	failpoint.Hit("file:stage-written")
	rel := filepath.Join(releases, b.Sha)
	trash := "" // where a release of the same sha that is not current was moved aside
	if _, err := fsys.Lstat(rel); err == nil {
		if tk.currentResolvesTo(rel) {
			// `current` resolves to the release being staged again (a tick resumed after the
			// swap): it is never moved aside. Its files are replaced one by one, each by a
			// rename, so `current` shows a complete release at every instant.
			if err := refreshRelease(fsys, staging, rel); err != nil {
				return err
			}
			ok = true
			failpoint.Hit("file:release-refreshed")
			_ = fsys.RemoveAll(staging)
			return tk.readyAndSwap(rel, b.Sha, ready)
		}
		// another release is current: this one is moved aside whole and replaced
		trash = filepath.Join(tk.Cfg.DeployDir, ".trash-"+files.RandomSuffix())
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
	if trash == "" {
		return tk.readyAndSwap(rel, b.Sha, ready)
	}
	return tk.swapOverTrash(fsys, rel, b.Sha, trash, ready)
}

// swapOverTrash runs ready on the release written at rel, in place of one of the same sha that
// was not current and is now at trash, points `current` at it and then removes trash.
func (tk *tick) swapOverTrash(fsys files.FS, rel, sha, trash string, ready func(rel string) error) error {
	if err := ready(rel); err != nil {
		return err
	}
	// the trashed release's new name is in deploy_dir
	if err := files.SyncDirFS(fsys, tk.Cfg.DeployDir); err != nil {
		return err
	}
	if err := tk.swapCurrent(sha); err != nil {
		return err
	}
	// removed only after the swap is durable, and only when `current` does not resolve
	// to it; a kill part-way leaves a .trash-* the next tick sweeps the same way
	return tk.removeUnlessCurrent(trash)
}

// newStaging writes the bundle and its .env into a new staging directory under deploy_dir,
// once releases/ exists; a staging directory that could not be written whole is removed.
func (tk *tick) newStaging(fsys files.FS, b *bundle.Bundle, env []byte, releases string) (string, error) {
	if err := files.MkdirAllFS(fsys, releases, 0o700); err != nil {
		return "", fmt.Errorf("stage: %w", err)
	}
	staging := filepath.Join(tk.Cfg.DeployDir, ".staging-"+machine.ShortSha(b.Sha)+"-"+files.RandomSuffix())
	if err := fsys.Mkdir(staging, 0o700); err != nil {
		return "", fmt.Errorf("stage: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = fsys.RemoveAll(staging)
		}
	}()
	if err := writeStaging(fsys, staging, b, env); err != nil {
		return "", err
	}
	ok = true
	return staging, nil
}

// readyAndSwap runs ready on the release written at rel, then points `current` at it.
func (tk *tick) readyAndSwap(rel, sha string, ready func(rel string) error) error {
	if err := ready(rel); err != nil {
		return err
	}
	return tk.swapCurrent(sha)
}

// writeStaging writes the bundle's directories and files and its .env (0600) into staging,
// each file fsynced, then every directory written into.
func writeStaging(fsys files.FS, staging string, b *bundle.Bundle, env []byte) error {
	dirs := map[string]bool{staging: true}
	for _, d := range b.Dirs {
		p := filepath.Join(staging, d)
		if err := files.MkdirAllFS(fsys, p, 0o755); err != nil {
			return fmt.Errorf("stage: %w", err)
		}
		dirs[p] = true
	}
	err := b.Each(func(name string, _ int64, r io.Reader) error {
		p := filepath.Join(staging, name)
		if err := files.MkdirAllFS(fsys, filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("stage: %w", err)
		}
		dirs[filepath.Dir(p)] = true
		return writeSyncedFrom(fsys, p, r, 0o644)
	})
	if err != nil {
		return err
	}
	if err := writeSynced(fsys, filepath.Join(staging, ".env"), env, 0o600); err != nil {
		return err
	}
	for d := range dirs {
		if err := files.SyncDirFS(fsys, d); err != nil {
			return err
		}
	}
	return nil
}

// swapCurrent points `current` at releases/<sha>, durably.
func (tk *tick) swapCurrent(sha string) error {
	if err := files.ReplaceSymlinkFS(tk.fs(), filepath.Join("releases", sha), tk.currentDir()); err != nil {
		return err
	}
	failpoint.Hit("file:current-swapped")
	return nil
}

// currentResolvesTo reports whether `current`, read now, resolves to dir (or a path inside
// it). An unreadable link resolves to nothing.
func (tk *tick) currentResolvesTo(dir string) bool {
	target, err := tk.fs().Readlink(tk.currentDir())
	if err != nil {
		return false
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(tk.Cfg.DeployDir, target)
	}
	target, dir = filepath.Clean(target), filepath.Clean(dir)
	return target == dir || strings.HasPrefix(target, dir+string(filepath.Separator))
}

// removeUnlessCurrent removes a directory of deploy_dir (a trashed or old release) unless
// `current`, read at this moment, resolves to it. Idempotent: an absent directory is done.
func (tk *tick) removeUnlessCurrent(dir string) error {
	if tk.currentResolvesTo(dir) {
		tk.Log.Warn().Msgf("%s is what `current` points at: kept", dir)
		return nil
	}
	if err := tk.fs().RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return files.SyncDirFS(tk.fs(), filepath.Dir(dir))
}

// refreshRelease brings the release directory rel to the staged tree: every staged file that
// differs is renamed over its counterpart (its directory fsynced), files the staged tree lacks
// are removed. Restartable: a kill part-way leaves every file whole, old or new, and the next
// tick stages and refreshes again.
func refreshRelease(fsys files.FS, staging, rel string) error {
	want := map[string]bool{}
	if err := moveIn(fsys, staging, rel, "", want); err != nil {
		return err
	}
	// what the staged tree lacks (deepest first, so a directory goes after its files)
	var extra []string
	listExtra(fsys, rel, "", want, &extra)
	for i := len(extra) - 1; i >= 0; i-- {
		p := filepath.Join(rel, extra[i])
		if err := fsys.RemoveAll(p); err != nil {
			return fmt.Errorf("refresh: %w", err)
		}
		if err := files.SyncDirFS(fsys, filepath.Dir(p)); err != nil {
			return err
		}
	}
	return nil
}

// moveIn moves each entry of staging's directory rp that rel lacks or holds otherwise into rel,
// by a rename, the directory renamed into synced; a directory both hold is walked into. want
// gathers every path the staged tree holds.
func moveIn(fsys files.FS, staging, rel, rp string, want map[string]bool) error {
	entries, err := fsys.ReadDir(filepath.Join(staging, rp))
	if err != nil {
		return fmt.Errorf("refresh: %w", err)
	}
	for _, e := range entries {
		name := filepath.Join(rp, e.Name())
		want[name] = true
		src, dst := filepath.Join(staging, name), filepath.Join(rel, name)
		if e.IsDir() {
			if fi, err := fsys.Lstat(dst); err == nil && fi.IsDir() {
				if err := moveIn(fsys, staging, rel, name, want); err != nil {
					return err
				}
				continue
			}
			_ = fsys.RemoveAll(dst)
		} else if sameFile(fsys, src, dst) {
			continue
		}
		if err := fsys.Rename(src, dst); err != nil {
			return fmt.Errorf("refresh: %w", err)
		}
		if err := files.SyncDirFS(fsys, filepath.Dir(dst)); err != nil {
			return err
		}
	}
	return nil
}

// listExtra adds to extra, parents first, each path under rel's directory rp that the staged
// tree does not hold (want).
func listExtra(fsys files.FS, rel, rp string, want map[string]bool, extra *[]string) {
	entries, err := fsys.ReadDir(filepath.Join(rel, rp))
	if err != nil {
		return
	}
	for _, e := range entries {
		name := filepath.Join(rp, e.Name())
		if !want[name] {
			*extra = append(*extra, name)
			continue
		}
		if e.IsDir() {
			listExtra(fsys, rel, name, want, extra)
		}
	}
}

// sameFile: dst holds src's bytes at src's mode.
func sameFile(fsys files.FS, src, dst string) bool {
	si, err1 := fsys.Lstat(src)
	di, err2 := fsys.Lstat(dst)
	if err1 != nil || err2 != nil || !di.Mode().IsRegular() || si.Mode().Perm() != di.Mode().Perm() {
		return false
	}
	a, err1 := fsys.ReadFile(src)
	b, err2 := fsys.ReadFile(dst)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

func writeSynced(fsys files.FS, path string, data []byte, perm os.FileMode) error {
	return writeSyncedFrom(fsys, path, bytes.NewReader(data), perm)
}

// writeSyncedFrom is writeSynced of what r yields.
func writeSyncedFrom(fsys files.FS, path string, r io.Reader, perm os.FileMode) error {
	if err := fsys.WriteFileFrom(path, r, perm); err != nil {
		return fmt.Errorf("stage %s: %w", filepath.Base(path), err)
	}
	if err := fsys.SyncFile(path); err != nil {
		return fmt.Errorf("stage %s: %w", filepath.Base(path), err)
	}
	return nil
}

// cleanLeftovers settles what an interrupted tick left behind. First the token's and the
// kept grant's temp files: a whole one is a completed write whose rename a kill or a power
// loss lost, and is renamed into place, so the resumed tick neither logs in nor leases again
// for it; a torn one is removed. Then staging and trash directories and temp links under
// deploy_dir, and the remaining temp copies under state_dir and of the docker config (they
// hold secrets: they must not outlive the kill that left them). A temp file that cannot be
// settled ends the tick before any network call.
func (tk *tick) cleanLeftovers() error {
	rec, err := files.RecoverTempsFS(tk.fs(), tk.Cfg.TokenPath(), credential.WholeToken)
	if err != nil {
		return err
	}
	if rec {
		tk.tokenRecovered = true
		tk.Log.Info().Msg("a token written before a restart was found under its temp name and kept")
	}
	if rec, err := files.RecoverTempsFS(tk.fs(), tk.Cfg.GrantPath(), credential.WholeGrant); err != nil {
		return err
	} else if rec {
		tk.Log.Info().Msg("a lease's grant written before a restart was found under its temp name and kept")
	}
	sweep := func(dir string, match func(string) bool) {
		entries, err := tk.fs().ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			if match(e.Name()) {
				_ = tk.fs().RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
	sweep(tk.Cfg.DeployDir, func(n string) bool {
		if strings.HasPrefix(n, ".staging-") || strings.HasPrefix(n, ".trash-") {
			return !tk.currentResolvesTo(filepath.Join(tk.Cfg.DeployDir, n))
		}
		return strings.HasPrefix(n, ".current.tmp-")
	})
	sweep(tk.Cfg.StateDir, func(n string) bool {
		return strings.HasPrefix(n, ".") && strings.Contains(n, ".tmp-") && n != ".state.db"
	})
	sweep(tk.Cfg.DockerConfigDir(), func(n string) bool { return strings.HasPrefix(n, ".config.json.") })
	sweep(filepath.Join(tk.Cfg.DeployDir, model.ResolvedDirName), func(n string) bool {
		return strings.HasPrefix(n, ".") && strings.Contains(n, ".tmp-") // a model's temp copy holds secrets
	})
	return nil
}

// removeCurrent drops the `current` link after a retire.
func removeCurrent(fsys files.FS, link string) error {
	if _, err := fsys.Lstat(link); err != nil {
		return nil
	}
	return files.RemoveFS(fsys, link)
}

// exists reports whether path is there (not following a last symlink), through the file seam.
func (tk *tick) exists(path string) bool {
	_, err := tk.fs().Lstat(path)
	return err == nil
}
