// Package files is the agent's only way to write files: every write is replaced, never
// rewritten in place (temp file, fsync, rename, fsync the directory), so a crash or a power
// loss leaves the old file or the new one, never half of either. Every operation goes through
// the FS seam (OS on a real box, filestest.CrashFS in the power-loss tests). It may not read or write
// anything but the paths it is given.
package files

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/tikali/monky-deployd/internal/failpoint"
)

// FS is the set of file operations the agent performs on its own files (token, grant, docker
// config, releases and the `current` link). The bbolt state file stays outside it: bbolt
// fsyncs its own writes.
type FS interface {
	// WriteFile creates path, which must not exist, with data at mode perm. Not synced.
	WriteFile(path string, data []byte, perm fs.FileMode) error
	// WriteFileFrom is WriteFile of what r yields, copied through a small buffer: a release's
	// large files are written without being held.
	WriteFileFrom(path string, r io.Reader, perm fs.FileMode) error
	// SyncFile fsyncs a file's content and mode.
	SyncFile(path string) error
	// SyncDir fsyncs a directory: its entries (creates, renames, removes) become durable.
	SyncDir(dir string) error
	Mkdir(path string, perm fs.FileMode) error
	MkdirAll(path string, perm fs.FileMode) error
	Chmod(path string, perm fs.FileMode) error
	Rename(oldpath, newpath string) error
	Symlink(target, link string) error
	Remove(path string) error
	RemoveAll(path string) error
	ReadFile(path string) ([]byte, error)
	Readlink(path string) (string, error)
	Lstat(path string) (fs.FileInfo, error)
	ReadDir(dir string) ([]fs.DirEntry, error)
}

// OS is the real filesystem.
var OS FS = osFS{}

type osFS struct{}

// WriteFile creates the file openat-style: relative to a descriptor of its directory opened
// without following a symlink, and itself with O_EXCL|O_NOFOLLOW, so a path component swapped
// after the directory was checked cannot redirect the write.
func (o osFS) WriteFile(path string, data []byte, perm fs.FileMode) error {
	return o.WriteFileFrom(path, bytes.NewReader(data), perm)
}

func (osFS) WriteFileFrom(path string, r io.Reader, perm fs.FileMode) error {
	d, err := os.OpenFile(filepath.Dir(path), os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	fd, err := syscall.Openat(int(d.Fd()), filepath.Base(path), syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, uint32(perm.Perm()))
	_ = d.Close()
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (osFS) SyncFile(path string) error { return syncPath(path) }
func (osFS) SyncDir(dir string) error   { return syncPath(dir) }

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func (osFS) Mkdir(path string, perm fs.FileMode) error    { return os.Mkdir(path, perm) }
func (osFS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) Chmod(path string, perm fs.FileMode) error    { return os.Chmod(path, perm) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) Symlink(target, link string) error            { return os.Symlink(target, link) }
func (osFS) Remove(path string) error                     { return os.Remove(path) }
func (osFS) RemoveAll(path string) error                  { return os.RemoveAll(path) }
func (osFS) ReadFile(path string) ([]byte, error)         { return ReadRegular(path) }
func (osFS) Readlink(path string) (string, error)         { return os.Readlink(path) }
func (osFS) Lstat(path string) (fs.FileInfo, error)       { return os.Lstat(path) }
func (osFS) ReadDir(dir string) ([]fs.DirEntry, error)    { return os.ReadDir(dir) }

// WriteAtomic replaces path with data at mode perm on the real filesystem (WriteAtomicFS).
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	return WriteAtomicFS(OS, path, data, perm)
}

// WriteAtomicFS replaces path with data at mode perm: a temp file in the same directory,
// fsync, rename over path, fsync the directory. The directory must exist.
func WriteAtomicFS(fsys FS, path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp := filepath.Join(dir, TempPrefix(path)+randomSuffix())
	if err := fsys.WriteFile(tmp, data, perm); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fsys.SyncFile(tmp); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	failpoint.Hit("file:tmp-synced:" + filepath.Base(path))
	if err := fsys.Rename(tmp, path); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDirFS(fsys, dir)
}

// TempPrefix is the name prefix of path's temp files: WriteAtomicFS writes path through
// "<dir>/.<base>.tmp-<random>".
func TempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// RecoverTempsFS settles what a kill or a power loss left of writes to path. A temp file of
// path whose content whole accepts is a completed write whose rename was lost: it is renamed
// over path and the directory fsynced (recovered is true). Every other temp file of path is
// garbage and removed. Two or more whole temp files cannot be told apart without guessing
// (a tick settles its predecessor's before writing any): they are all removed.
// Restartable: a kill inside it leaves at most what it found.
func RecoverTempsFS(fsys FS, path string, whole func([]byte) bool) (recovered bool, err error) {
	dir, prefix := filepath.Dir(path), TempPrefix(path)
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("recover %s: %w", path, err)
	}
	var good, bad []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		data, rerr := fsys.ReadFile(p)
		if e.Type().IsRegular() && rerr == nil && whole(data) {
			good = append(good, p)
		} else {
			bad = append(bad, p)
		}
	}
	if len(good) > 1 {
		bad, good = append(bad, good...), nil
	}
	if len(good) == 1 {
		if err := fsys.Rename(good[0], path); err != nil {
			return false, fmt.Errorf("recover %s: %w", path, err)
		}
		failpoint.Hit("file:tmp-recovered:" + filepath.Base(path))
		recovered = true
	}
	for _, p := range bad {
		if err := fsys.RemoveAll(p); err != nil {
			return recovered, fmt.Errorf("recover %s: %w", path, err)
		}
	}
	if recovered || len(bad) > 0 {
		return recovered, SyncDirFS(fsys, dir)
	}
	return false, nil
}

// MkdirAllFS is MkdirAll whose new directories survive a power loss: each directory it
// creates is fsynced into its parent (the deepest one's own entries are the caller's).
func MkdirAllFS(fsys FS, path string, perm os.FileMode) error {
	path = filepath.Clean(path)
	var missing []string
	for p := path; ; p = filepath.Dir(p) {
		if _, err := fsys.Lstat(p); err == nil {
			break
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if err := fsys.MkdirAll(path, perm); err != nil {
		return fmt.Errorf("mkdir %s: %w", path, err)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := SyncDirFS(fsys, filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// SyncDirFS fsyncs a directory so a rename or a new entry in it survives a power loss.
func SyncDirFS(fsys FS, dir string) error {
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// ReplaceSymlinkFS points link at target atomically: a symlink under a temp name, renamed
// over link, and the directory fsynced.
func ReplaceSymlinkFS(fsys FS, target, link string) error {
	dir := filepath.Dir(link)
	tmp := filepath.Join(dir, "."+filepath.Base(link)+".tmp-"+randomSuffix())
	if err := fsys.Symlink(target, tmp); err != nil {
		return fmt.Errorf("symlink %s: %w", link, err)
	}
	failpoint.Hit("file:tmp-linked:" + filepath.Base(link))
	if err := fsys.Rename(tmp, link); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("symlink %s: %w", link, err)
	}
	return SyncDirFS(fsys, dir)
}

// RemoveFS deletes path when it exists and fsyncs its directory; an absent file is not an error.
func RemoveFS(fsys FS, path string) error {
	if err := fsys.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return SyncDirFS(fsys, filepath.Dir(path))
}

// Stamp identifies a file's version without reading it: size, mtime and inode.
// "" when the file does not exist or is empty.
func Stamp(path string) string {
	st, err := os.Stat(path)
	if err != nil || st.Size() == 0 {
		return ""
	}
	return fmt.Sprintf("%d:%d:%d", st.Size(), st.ModTime().UnixNano(), inode(st))
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RandomSuffix is a short random hex string for temp names.
func RandomSuffix() string { return randomSuffix() }
