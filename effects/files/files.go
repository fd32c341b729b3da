// Package files is the agent's only way to write files: every write is replaced, never
// rewritten in place (temp file, fsync, rename, fsync the directory), so a crash or a power
// loss leaves the old file or the new one, never half of either. It may not read or write
// anything but the paths it is given.
package files

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/tikali/monky-deployd/failpoint"
)

// WriteAtomic replaces path with data at mode perm: a temp file in the same directory,
// fsync, rename over path, fsync the directory. The directory must exist.
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	name := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			_ = tmp.Close()
			_ = os.Remove(name)
		}
	}()
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	failpoint.Hit("file:tmp-synced:" + filepath.Base(path))
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	ok = true
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so a rename or a new entry in it survives a power loss.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// SyncFile fsyncs a written file.
func SyncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// ReplaceSymlink points link at target atomically: a symlink under a temp name, renamed
// over link, and the directory fsynced.
func ReplaceSymlink(target, link string) error {
	dir := filepath.Dir(link)
	tmp := filepath.Join(dir, "."+filepath.Base(link)+".tmp-"+randomSuffix())
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("symlink %s: %w", link, err)
	}
	failpoint.Hit("file:tmp-linked:" + filepath.Base(link))
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("symlink %s: %w", link, err)
	}
	return SyncDir(dir)
}

// Remove deletes path when it exists and fsyncs its directory; an absent file is not an error.
func Remove(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
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

// ModTime is a file's modification time, zero when absent.
func ModTime(path string) time.Time {
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RandomSuffix is a short random hex string for temp names.
func RandomSuffix() string { return randomSuffix() }
