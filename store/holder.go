package store

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unicode"

	"golang.org/x/sys/unix"
)

// How long each side waits for the other's lock on the state file. A reader (status, explain,
// check) holds a shared lock for one read transaction and gives up after ReaderWait when a
// tick holds the file; a tick waits TickWait for readers to let go before it gives up (exit
// 75). The tick waits longer than readers wait for it, so a reader never fails a tick that it
// only delayed (docs/JOURNAL.md).
const (
	ReaderWait = defaultTimeout
	TickWait   = 15 * ReaderWait
)

// LockedError is a lock on the state file not obtained within the wait: it is ErrLocked, and
// names what held the file when the wait ended (from /proc/locks, where readable).
type LockedError struct {
	Path   string
	Holder string // "pid 1234 (bbolt), shared"; "" when nothing could be read
}

func (e *LockedError) Error() string {
	s := fmt.Sprintf("open %s: %v", e.Path, ErrLocked)
	if e.Holder != "" {
		s += " (held by " + e.Holder + ")"
	}
	return s
}

// Is makes a LockedError ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// lockedAt is the LockedError of path, naming its holders as /proc/locks tells them now.
func lockedAt(path string) *LockedError {
	return &LockedError{Path: path, Holder: Holders(path, "/proc")}
}

// Holders names the processes holding a lock on the file at path, as proc's locks file tells
// them: "pid 1234 (bbolt), shared", joined by "; ". It is "" when nothing holds it or the
// files cannot be read (no /proc). The command name is read from <proc>/<pid>/comm where
// readable (a holder in another pid namespace has none).
func Holders(path, proc string) string {
	fi, err := os.Lstat(path)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	f, err := os.Open(proc + "/locks")
	if err != nil {
		return ""
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  READ 1234 fe:00:398608 0 EOF"; a waiter's line has "->" after the number
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[1] == "->" || fs[5] != id {
			continue
		}
		out = append(out, holderWords(fs[4], fs[3], proc))
	}
	return strings.Join(out, "; ")
}

// holderWords is one holder: its pid, its command where readable, and the lock's kind.
func holderWords(pid, mode, proc string) string {
	s := "pid " + pid
	if _, err := strconv.Atoi(pid); err == nil {
		if b, err := readSmall(proc + "/" + pid + "/comm"); err == nil {
			if c := strings.Map(printable, strings.TrimSpace(string(b))); c != "" {
				s += " (" + c + ")"
			}
		}
	}
	if mode == "READ" {
		return s + ", shared"
	}
	return s + ", exclusive"
}

// printable keeps a command name's printable runes; any other is '?' (a name is the holder's
// own choice and reaches the log).
func printable(r rune) rune {
	if unicode.IsPrint(r) {
		return r
	}
	return '?'
}

// readSmall reads at most 256 bytes of a file that is a regular one or a proc file.
func readSmall(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 256)
	n, err := f.Read(b)
	if n == 0 && err != nil {
		return nil, err
	}
	return b[:n], nil
}
