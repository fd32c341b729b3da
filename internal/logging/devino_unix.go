//go:build unix

package logging

import (
	"fmt"
	"os"
	"syscall"
)

// devIno is "<dev>:<ino>" of a file, in the form systemd writes to JOURNAL_STREAM.
func devIno(fi os.FileInfo) (string, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), true
}
