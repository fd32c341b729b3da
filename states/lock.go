package states

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes the tick lock without waiting. held is false when another tick has it.
func lockFile(path string) (unlock func(), held bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("tick lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("tick lock: %w", err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, true, nil
}

// TickRunning reports whether a tick holds the lock now (for status and explain).
func TickRunning(path string) bool {
	unlock, held, err := lockFile(path)
	if err != nil {
		return false
	}
	if held {
		unlock()
		return false
	}
	return true
}
