package states

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/bundle"
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

// keptBundle is sha's kept bundle opened for reading, with its size, or nil when none is kept or
// it cannot be trusted (it is then removed: the caller fetches). The tick closes it at its end.
func (tk *tick) keptBundle(sha string) (*os.File, int64) {
	if sha == "" {
		return nil, 0
	}
	dir := tk.bundlesDir()
	if err := files.CheckDir(dir); err != nil {
		tk.Log.Warn().Msg("kept bundles: " + err.Error() + "; fetching")
		return nil, 0
	}
	f, size, err := files.OpenTrusted(tk.keptBundlePath(sha))
	if err == nil && size > tk.maxArchiveBytes() {
		f.Close()
		err = fmt.Errorf("%s: larger than %d bytes", tk.keptBundlePath(sha), tk.maxArchiveBytes())
	}
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			tk.Log.Warn().Msg("kept bundle: " + err.Error() + "; fetching")
			tk.dropKeptBundle(sha)
		}
		return nil, 0
	}
	tk.archives = append(tk.archives, f)
	return f, size
}

// maxArchiveBytes bounds an archive file: max_bundle_bytes, as the download is bounded.
func (tk *tick) maxArchiveBytes() int64 {
	if tk.Cfg.MaxBundleBytes > 0 {
		return tk.Cfg.MaxBundleBytes
	}
	return bundle.DefaultMaxBytes
}

// fetchFile is a new private file in the bundles directory that a download is written into,
// read from while it is verified, and kept under its sha when it verifies (keepBundle). A name
// starting with a dot: a download a kill cut short is removed at the next check-in
// (keepOnlyBundle). The tick closes it at its end.
//
// A bundles directory the agent cannot use (not its own, a link) costs only the keeping, as it
// did before downloads went to disk: the download goes to an anonymous temporary file instead,
// with a warning. A full or read-only disk is the tick's fault (STATE_UNWRITABLE).
func (tk *tick) fetchFile() (*os.File, error) {
	f, err := tk.fetchFileIn(tk.bundlesDir())
	if err != nil {
		if _, full := effects.Unwritable(err); full {
			return nil, err
		}
		tk.Log.Warn().Msg("kept bundles: " + err.Error() + "; the download goes to a temporary file and is not kept")
		if f, err = os.CreateTemp("", "monky-deployd-fetch-*"); err != nil {
			return nil, err
		}
		_ = os.Remove(f.Name()) // anonymous: gone with the tick, however it ends
	}
	tk.archives = append(tk.archives, f)
	return f, nil
}

func (tk *tick) fetchFileIn(dir string) (*os.File, error) {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	if err := files.CheckDir(dir); err != nil {
		return nil, err
	}
	return os.CreateTemp(dir, ".fetch-*")
}

// discardFetched removes a download that did not verify (or was not whole).
func (tk *tick) discardFetched(f *os.File) {
	if filepath.Dir(f.Name()) != tk.bundlesDir() {
		return // anonymous: removed already
	}
	if err := os.Remove(f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		tk.Log.Warn().Msg("remove a fetched bundle: " + err.Error())
	}
}

// keepBundle keeps the verified download f as sha's bundle for the retries of its apply, and
// drops any other. A bundle that cannot be kept is only fetched again next time: a warning,
// never a failure.
func (tk *tick) keepBundle(sha string, f *os.File) {
	tk.keepOnlyBundle(sha)
	if filepath.Dir(f.Name()) != tk.bundlesDir() {
		return // an anonymous download (fetchFile): nowhere to keep it
	}
	err := f.Sync()
	if err == nil {
		err = os.Rename(f.Name(), tk.keptBundlePath(sha))
	}
	if err == nil {
		err = files.SyncDirFS(files.OS, tk.bundlesDir())
	}
	if err != nil {
		tk.Log.Warn().Msg("keep the bundle: " + err.Error())
		tk.discardFetched(f)
	}
}

// closeArchives closes the archive files the tick read its bundle from.
func (tk *tick) closeArchives() {
	for _, f := range tk.archives {
		f.Close()
	}
	tk.archives = nil
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
	if files.CheckDir(dir) != nil {
		return // none kept there, or not the agent's own directory: nothing in it is removed
	}
	es, err := os.ReadDir(dir)
	if err != nil {
		return // none kept (or the directory is not readable: keepBundle says so)
	}
	for _, e := range es {
		if sha != "" && e.Name() == sha+".bundle" || tk.fetching(e.Name()) {
			continue
		}
		if strings.HasSuffix(e.Name(), ".bundle") || strings.HasPrefix(e.Name(), ".") {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				tk.Log.Warn().Msg("drop a kept bundle: " + err.Error())
			}
		}
	}
}

// fetching reports whether name is a download this tick has open.
func (tk *tick) fetching(name string) bool {
	for _, f := range tk.archives {
		if filepath.Base(f.Name()) == name {
			return true
		}
	}
	return false
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
