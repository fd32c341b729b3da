//go:build cgo

package budget

import (
	"os"
	"syscall"
)

// childStack is the RLIMIT_STACK a child of a cgo build runs under. Such a build creates its
// threads with the C library, whose default thread stack is RLIMIT_STACK's soft limit (8 MiB
// on most boxes, more on some) mapped writable at once: counted by RLIMIT_DATA, a few threads
// would use up MemoryBytes with stacks nobody touches. The agent's own build (CGO_ENABLED=0)
// gives its threads the Go runtime's small stacks; only a test binary is a cgo build.
const childStack = 1 << 20

// smallStacks lowers the child's RLIMIT_STACK to childStack and executes the child again, once,
// so that the C library reads the lower limit as it starts; a child already under it goes on.
func smallStacks() error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &l); err != nil {
		return err
	}
	if l.Cur <= childStack {
		return nil
	}
	l.Cur = childStack
	if err := syscall.Setrlimit(syscall.RLIMIT_STACK, &l); err != nil {
		return err
	}
	return syscall.Exec("/proc/self/exe", os.Args, os.Environ())
}
