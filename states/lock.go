package states

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes the tick lock without waiting. held is false when another tick has it.
func lockFile(path string) (lk *tickLock, held bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("tick lock: %w", err)
	}
	return flockFile(f)
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

// takeLock takes the tick lock, or keeps the one the heartbeat build passed across its exec:
// the same file as the lock's path, on which flock succeeds again at once while it is held.
// A passed file that is not the lock file is closed and the lock taken as usual.
func (a *Agent) takeLock() (*tickLock, bool, error) {
	if f := a.heldLock(); f != nil {
		a.Handed.Lock = nil
		if isFile(f, a.Cfg.LockPath()) {
			return flockFile(f)
		}
		f.Close()
		a.Handed = nil
	}
	return lockFile(a.Cfg.LockPath())
}

func isFile(f *os.File, path string) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	pi, err := os.Stat(path)
	return err == nil && os.SameFile(fi, pi)
}

// TickRunning reports whether a tick holds the lock now (for status and explain). It opens
// the lock file read-only and never creates it: no lock file means no tick holds it, and a
// read-only command must leave no file behind (one created by root would lock every later
// tick out).
func TickRunning(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
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
