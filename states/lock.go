package states

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/tikali/monky-deployd/effects/files"
)

// lockFile takes the tick lock without waiting. held is false when another tick has it. The
// lock file is a regular file of its own: a symlink is not followed, and a FIFO, a device or a
// socket planted there is refused without waiting on it.
func lockFile(path string) (lk *tickLock, held bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("tick lock: %w", lockTrust(path, err))
	}
	if err := files.IsRegular(f); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("tick lock: %w", lockTrust(path, err))
	}
	return flockFile(f)
}

// lockTrust is why the lock file at path could not be used: what the trust rules find there
// (a symlink, a directory, another user's file: a *files.TrustError, whose fix mends it), else
// err.
func lockTrust(path string, err error) error {
	var te *files.TrustError
	if errors.As(files.CheckFile(path), &te) {
		return te
	}
	return err
}

// flockFile takes the lock on f without waiting; f is closed unless the lock is held.
func flockFile(f *os.File) (lk *tickLock, held bool, err error) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("tick lock: %w", err)
	}
	return &tickLock{f}, true, nil
}

// takeLock takes the tick lock without waiting. held is false when another tick has it.
func (a *Agent) takeLock() (*tickLock, bool, error) { return lockFile(a.Cfg.LockPath()) }

// tickLock is the tick lock, held.
type tickLock struct{ f *os.File }

func (l *tickLock) release() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}

// TickRunning reports whether a tick holds the lock now (for status and explain). It opens
// the lock file read-only and never creates it (nor waits on a FIFO planted there: that is no
// tick either): no lock file means no tick holds it, and a
// read-only command must leave no file behind (one created by root would lock every later
// tick out).
func TickRunning(path string) bool {
	f, err := files.OpenRegular(path)
	if err != nil {
		return false
	}
	lk, held, err := flockFile(f)
	if err != nil {
		return false
	}
	if held {
		lk.release()
		return false
	}
	return true
}
