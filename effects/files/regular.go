package files

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrNotRegular: a path the agent reads is a FIFO, a device, a socket or a directory, not a
// regular file. Such a file is never read: a FIFO would make the reader wait for a writer
// forever.
var ErrNotRegular = errors.New("not a regular file")

// OpenRegular opens path read-only as a regular file: without following a symlink in its last
// component, without blocking on a FIFO (O_NONBLOCK, which changes nothing for a regular file),
// and refusing anything but a regular file with an error wrapping ErrNotRegular.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := IsRegular(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// IsRegular reports, as an error wrapping ErrNotRegular, an open f that is not a regular file.
func IsRegular(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is %s: %w", f.Name(), typeName(fi.Mode()), ErrNotRegular)
	}
	return nil
}

// ReadRegular reads the regular file at path whole (OpenRegular).
func ReadRegular(path string) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
