// Package disk measures free space for the pre-flight DISK_INSUFFICIENT check. It only asks
// the kernel (statfs); it writes nothing and decides nothing.
package disk

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"

	"github.com/tikali/monky-deployd/effects"
)

// Statfs is effects.Disk over statfs(2).
type Statfs struct{}

var _ effects.Disk = Statfs{}

// Free returns the bytes an unprivileged writer may still use (f_bavail × f_bsize) on the
// filesystem holding path, or holding its nearest existing ancestor when path does not exist
// (containerd's root before its first pull, a data-root not yet created).
func (Statfs) Free(path string) (uint64, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return 0, fmt.Errorf("free space of %s: %w", path, err)
	}
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(p, &st)
		if err == nil {
			return uint64(st.Bavail) * uint64(st.Bsize), nil
		}
		parent := filepath.Dir(p)
		if (!errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOTDIR)) || parent == p {
			return 0, fmt.Errorf("free space of %s: statfs %s: %w", path, p, err)
		}
		p = parent
	}
}
