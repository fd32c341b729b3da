package states

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// The bundle cache (docs/JOURNAL.md, "Disk use beside the file"): a bundle
// verified for a sha is kept as <state_dir>/bundles/<sha>.bundle (0600, the directory 0700)
// until that sha is applied, refused or no longer desired. While its apply retries (OpenBao
// down, a pull failing) fetchBundle reads it from there — opened without following a symlink,
// owned by the agent's user — and verifies it again exactly as a fetched one (the sha
// recomputed from the content); one that no longer verifies is removed and fetched again.
// At most one bundle is kept: the desired sha's.

// bundlesDir is where verified bundles wait for their apply.
func (tk *tick) bundlesDir() string { return filepath.Join(tk.Cfg.StateDir, "bundles") }

// keptBundlePath is where sha's verified bundle is kept.
func (tk *tick) keptBundlePath(sha string) string {
	return filepath.Join(tk.bundlesDir(), sha+".bundle")
}

// keptBundle is sha's kept bundle, or nil when none is kept or it cannot be trusted (it is then
// removed: the caller fetches).
func (tk *tick) keptBundle(sha string) []byte {
	if sha == "" {
		return nil
	}
	dir := tk.bundlesDir()
	if err := files.CheckDir(dir); err != nil {
		tk.Log.Warn().Msg("kept bundles: " + err.Error() + "; fetching")
		return nil
	}
	b, err := files.ReadTrusted(tk.keptBundlePath(sha), tk.Cfg.MaxBundleBytes)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			tk.Log.Warn().Msg("kept bundle: " + err.Error() + "; fetching")
			tk.dropKeptBundle(sha)
		}
		return nil
	}
	return b
}

// keepBundle keeps sha's verified bundle for the retries of its apply, and drops any other.
// A bundle that cannot be kept is only fetched again next time: a warning, never a failure.
func (tk *tick) keepBundle(sha string, body []byte) {
	tk.keepOnlyBundle(sha)
	dir := tk.bundlesDir()
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		tk.Log.Warn().Msg("keep the bundle: " + err.Error())
		return
	}
	if err := files.CheckDir(dir); err != nil {
		tk.Log.Warn().Msg("keep the bundle: " + err.Error())
		return
	}
	if err := files.WriteAtomic(tk.keptBundlePath(sha), body, 0o600); err != nil {
		tk.Log.Warn().Msg("keep the bundle: " + err.Error())
	}
}

// dropKeptBundle removes sha's kept bundle (applied, refused, or no longer trusted).
func (tk *tick) dropKeptBundle(sha string) {
	if sha == "" {
		return
	}
	if err := os.Remove(tk.keptBundlePath(sha)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		tk.Log.Warn().Msg("drop the kept bundle: " + err.Error())
	}
}

// keepOnlyBundle removes every kept bundle but sha's ("" removes them all), and what a write
// cut short left behind: a sha no longer desired has nothing to keep.
func (tk *tick) keepOnlyBundle(sha string) {
	dir := tk.bundlesDir()
	es, err := os.ReadDir(dir)
	if err != nil {
		return // none kept (or the directory is not readable: keepBundle says so)
	}
	for _, e := range es {
		if sha != "" && e.Name() == sha+".bundle" {
			continue
		}
		if strings.HasSuffix(e.Name(), ".bundle") || strings.HasPrefix(e.Name(), ".") {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				tk.Log.Warn().Msg("drop a kept bundle: " + err.Error())
			}
		}
	}
}

// keepOnlyDesiredBundle drops, at each check-in, every kept bundle but the desired sha's when
// tenancy asks for an apply (all of them otherwise).
func (tk *tick) keepOnlyDesiredBundle(resp effects.CheckinResponse) {
	keep := ""
	if resp.Action == vocab.ActionApply {
		keep = resp.DesiredSha
	}
	tk.keepOnlyBundle(keep)
}
