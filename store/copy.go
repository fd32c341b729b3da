package store

import (
	"fmt"
	"os"
	"syscall"
)

// MaxCopyBytes bounds a state file read as a copy (status, explain and the triage's --state-file):
// a box's own file stays far below it (retention keeps the journal to a few MiB).
const MaxCopyBytes = 1 << 30

// CheckCopy refuses, before anything maps or reads it, a copy of a state file that is not one:
// a FIFO (reading it would block), a device or a link to one (/dev/zero never ends), a file
// larger than MaxCopyBytes, or a sparse file whose holes would be read as pages (a 3 GiB file of
// a few blocks). A support engineer reads copies from boxes they do not trust: what a copy may
// cost is decided here, not by what bbolt makes of it.
func CheckCopy(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a state file: not a regular file (%s)", path, fi.Mode().Type())
	}
	if fi.Size() > MaxCopyBytes {
		return fmt.Errorf("%s is not a state file: %d bytes, more than a copy may hold (%d)", path, fi.Size(), MaxCopyBytes)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Size() > 1<<20 && st.Blocks*512 < fi.Size()/2 {
		return fmt.Errorf("%s is not a state file: %d bytes of which %d are written (a sparse file)", path, fi.Size(), st.Blocks*512)
	}
	return nil
}
