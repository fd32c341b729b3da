package docker

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/bundle"
	"github.com/tikali/monky-deployd/internal/model"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// RELEASE_CHANGED (vocab.ReleaseChanged): before a compose call, the release directory is not what was verified
// (a file of the bundle changed, a symlink was planted, the resolved model is missing or not
// the agent's own). Compose is not run.

// MaxTreeEntries bounds the walk of a release directory before a compose call: a tree that
// holds more (a service writing its data into a bind of the release) is not walked to its end
// and counts as changed. Data belongs in named volumes.
const MaxTreeEntries = 100000

// VerifyRelease checks that the release directory rel (<deploy_dir>/releases/<sha>, symlinks
// resolved) is what was verified: the files bundle.json lists, bundle.json included, are
// regular files whose bytes hash to <sha> (the bundle sha, PROTOCOL.md §2), and nothing in
// the tree is a symlink. A directory the agent cannot read is skipped unless a file of the
// bundle lies in it. The error is an *effects.Error of vocab.ReleaseChanged naming the path.
func VerifyRelease(op, rel string) error {
	sha := filepath.Base(rel)
	changed := func(format string, args ...any) error {
		return &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.ReleaseChanged,
			Msg:  fmt.Sprintf("release %s: ", shortSha(sha)) + fmt.Sprintf(format, args...) + "; compose not run",
			Hint: "a container or a person changed the release directory: an apply's retry stages it again from the verified bundle; a heartbeat reports it every tick until the release is restored or a new sha is desired"}
	}
	if !bundle.ValidSha(sha) {
		return changed("%s is not a release directory", sanitize.Line(rel))
	}
	if fi, err := os.Lstat(rel); err != nil || !fi.IsDir() {
		return changed("%s is not a directory", sanitize.Line(rel))
	}
	meta, err := readRegular(filepath.Join(rel, bundle.MetaFile), func(r io.Reader) ([]byte, error) {
		return io.ReadAll(io.LimitReader(r, maxMetaBytes)) // a longer one no longer hashes to the sha
	})
	if err != nil {
		return changed("%s: %s", bundle.MetaFile, sanitize.Line(err.Error()))
	}
	var m bundle.Meta
	if err := json.Unmarshal(meta, &m); err != nil {
		return changed("%s does not parse", bundle.MetaFile)
	}
	want := map[string][sha256.Size]byte{bundle.MetaFile: sha256.Sum256(meta)}
	dirs := map[string]bool{}
	for _, n := range m.Files {
		if n == bundle.MetaFile {
			continue
		}
		if !filepath.IsLocal(n) || filepath.Clean(n) != n {
			return changed("%s lists %s, not a path inside the release", bundle.MetaFile, sanitize.Line(n))
		}
		sum, err := readRegular(filepath.Join(rel, n), hashOf)
		if err != nil {
			return changed("%s: %s", sanitize.Line(n), sanitize.Line(err.Error()))
		}
		want[n] = [sha256.Size]byte(sum)
		for d := filepath.Dir(n); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	if got := bundle.ShaOfSums(want); got != sha {
		return changed("its files hash to %s, not to the verified sha", shortSha(got))
	}
	n := 0
	err = filepath.WalkDir(rel, func(p string, d fs.DirEntry, err error) error {
		name, _ := filepath.Rel(rel, p)
		if err != nil {
			if d != nil && d.IsDir() && p != rel && !dirs[name] && errors.Is(err, fs.ErrPermission) {
				return fs.SkipDir // a service's own data directory: nothing of the bundle lies in it
			}
			return changed("%s: %s", sanitize.Line(name), sanitize.Line(err.Error()))
		}
		if n++; n > MaxTreeEntries {
			return changed("more than %d entries in its tree", MaxTreeEntries)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			return changed("%s is a symlink (→ %s)", sanitize.Line(name), sanitize.Line(target))
		}
		return nil
	})
	return err
}

// VerifyModel checks that the resolved model of rel and the empty env file beside it are the
// agent's own regular files (not symlinks, not writable by another user) and that the env file
// is empty.
func VerifyModel(op, rel string) error {
	sha := filepath.Base(rel)
	model, envFile := model.ModelPath(rel), model.EmptyEnvPath(rel)
	fail := func(what string) error {
		return &effects.Error{Op: op, Kind: effects.Permanent, Code: vocab.ReleaseChanged,
			Msg:  fmt.Sprintf("release %s: %s; compose not run", shortSha(sha), what),
			Hint: "the next apply stages the release and writes its model again"}
	}
	if err := files.CheckDir(filepath.Dir(model)); err != nil {
		return fail(sanitize.Line(err.Error()))
	}
	for _, p := range []string{model, envFile} {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			return fail("no resolved model " + sanitize.Line(p) + " (the release was not staged by this agent)")
		}
	}
	if err := files.CheckFile(model); err != nil {
		return fail(sanitize.Line(err.Error()))
	}
	if err := files.CheckFile(envFile); err != nil {
		return fail(sanitize.Line(err.Error()))
	}
	if fi, err := os.Lstat(envFile); err != nil || fi.Size() != 0 {
		return fail(sanitize.Line(envFile) + " is not empty")
	}
	return nil
}

// maxMetaBytes bounds what is read of a release's bundle.json: more than a bundle may hold of it
// (internal/bundle reads at most 8 MiB of it).
const maxMetaBytes = 8<<20 + 1

// hashOf is the sha256 of what r yields, read through a small buffer: a release's large files
// are hashed, never held.
func hashOf(r io.Reader) ([]byte, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// readRegular reads path, which must be a regular file (a symlink is not followed), with read.
func readRegular(path string, read func(io.Reader) ([]byte, error)) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, errors.Unwrap(err)
	}
	if !fi.Mode().IsRegular() {
		kind := "not a regular file"
		if fi.Mode()&fs.ModeSymlink != 0 {
			t, _ := os.Readlink(path)
			kind = "a symlink (→ " + t + ")"
		}
		return nil, errors.New("is " + kind)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, errors.Unwrap(err)
	}
	defer f.Close()
	return read(f)
}

func shortSha(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
