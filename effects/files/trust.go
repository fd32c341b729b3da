package files

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// The files the agent trusts (docs/OPERATIONS.md, "Files and modes"): bao.token, the kept grant,
// bootstrap.jwt, state.db and docker/config.json are opened without following a symlink, and
// the opened descriptor must be a regular file owned by the agent's user and not group- or
// world-writable; state_dir, deploy_dir and releases/ must be directories owned by the agent's
// user and not group- or world-writable. A file that fails is neither read nor written through:
// the error names the path and the command that fixes it.

// TrustError is a file or directory the agent refuses to trust.
type TrustError struct {
	Path    string
	Problem string // what is wrong, in a few words
	// Reason is what the check found, typed (vocab.ReasonTrustLink …): the journal keeps it
	// with Path, and a fix line read from a copy is TrustFix of the two.
	Reason vocab.Reason
	// Fix is the command that fixes it, as a person's shell runs it (the directories are the
	// agent's, 0700): as the agent's user what it may do (remove an entry of a directory it owns,
	// change the mode of its own file), as root only what it may not (a chown, an entry of a
	// directory not its own, a tree that may hold another's files); the path shell-quoted.
	Fix string
}

func (e *TrustError) Error() string {
	return fmt.Sprintf("%s %s: not trusted — fix: %s", e.Path, e.Problem, e.Fix)
}

// AgentUID is the user the agent runs as (the effective uid); a test may change it.
var AgentUID = os.Geteuid

// userName is the agent user's name for a fix (its uid when it has none).
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}

// ownedBy reports whether path (not followed) is a directory uid owns.
func ownedBy(path string, uid int) bool {
	fi, err := os.Lstat(path)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}

// TrustFix is the command that mends what a trust check found (reason, one of
// vocab.ReasonTrust*) at path, for the agent's user (a name, or a uid with no name), as a
// person's shell runs it: as that user what it may do (remove an entry of a directory it owns,
// ownDir; change its own file's mode), as root only what it may not (a chown, an entry of a
// directory not its own, a tree that may hold another user's files); path shell-quoted. "" for
// any other reason. The agent's error and a fix line read from a copy print it alike.
func TrustFix(reason vocab.Reason, path, user string, ownDir bool) string {
	p := sanitize.ShellWord(path)
	as := "sudo "
	if user != "root" && user != "0" {
		if _, err := strconv.Atoi(user); err == nil {
			as = "sudo -u '#" + user + "' "
		} else {
			as = "sudo -u " + sanitize.ShellWord(user) + " "
		}
	}
	rm := "sudo rm -- " + p
	if ownDir {
		rm = as + "rm -- " + p
	}
	switch reason {
	case vocab.ReasonTrustLink, vocab.ReasonTrustType:
		return rm
	case vocab.ReasonTrustTree:
		return "sudo rm -r -- " + p
	case vocab.ReasonTrustOwner:
		return "sudo chown " + sanitize.ShellWord(user) + ": " + p
	case vocab.ReasonTrustMode:
		return as + "chmod go-rwx " + p
	}
	return ""
}

// trustError is what a trust check found at path, for the agent's user uid.
func trustError(path, problem string, reason vocab.Reason, uid int) *TrustError {
	return &TrustError{Path: path, Problem: problem, Reason: reason,
		Fix: TrustFix(reason, path, userName(uid), ownedBy(filepath.Dir(path), uid))}
}

// checkStat applies the trust rules to an opened descriptor's stat.
func checkStat(path string, fi fs.FileInfo, dir bool) error {
	return checkStatAs(path, fi, dir, AgentUID())
}

// checkStatAs is checkStat for files that must be uid's.
func checkStatAs(path string, fi fs.FileInfo, dir bool, uid int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return trustError(path, "is a symlink", vocab.ReasonTrustLink, uid)
	case dir && !fi.IsDir():
		return trustError(path, fmt.Sprintf("is not a directory (%s)", typeName(fi.Mode())), vocab.ReasonTrustType, uid)
	case !dir && fi.IsDir():
		return trustError(path, "is not a regular file (a directory)", vocab.ReasonTrustTree, uid)
	case !dir && !fi.Mode().IsRegular():
		return trustError(path, fmt.Sprintf("is not a regular file (%s)", typeName(fi.Mode())), vocab.ReasonTrustType, uid)
	case int(st.Uid) != uid:
		return trustError(path, fmt.Sprintf("is owned by %s, not by the agent's user %s", userName(int(st.Uid)), userName(uid)), vocab.ReasonTrustOwner, uid)
	// the file is uid's (the case above): its user changes its mode
	case fi.Mode().Perm()&0o022 != 0:
		return trustError(path, fmt.Sprintf("is group- or world-writable (%04o)", fi.Mode().Perm()), vocab.ReasonTrustMode, uid)
	}
	return nil
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return m.Type().String()
}

// openNoFollow opens path read-only without following a symlink in its last component (and
// without blocking on a FIFO).
func openNoFollow(path string, dir bool) (*os.File, error) {
	flag := os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	if dir {
		flag |= syscall.O_DIRECTORY
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || (dir && errors.Is(err, syscall.ENOTDIR)) {
			fi, lerr := os.Lstat(path)
			if lerr == nil {
				if cerr := checkStat(path, fi, dir); cerr != nil {
					return nil, cerr
				}
			}
			return nil, trustError(path, "is a symlink", vocab.ReasonTrustLink, AgentUID())
		}
		return nil, err
	}
	return f, nil
}

// OpenTrusted opens one of the files the agent trusts for reading, by the rules of ReadTrusted,
// and says its size; the caller closes it.
func OpenTrusted(path string) (*os.File, int64, error) {
	f, err := openNoFollow(path, false)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkStat(path, fi, false)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// ReadTrusted reads one of the files the agent trusts, at most max bytes. A missing file is an
// error wrapping fs.ErrNotExist; a file that breaks a trust rule is a *TrustError and is not read.
func ReadTrusted(path string, max int64) ([]byte, error) {
	f, _, err := OpenTrusted(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("read %s: larger than %d bytes", path, max)
	}
	return b, nil
}

// ReadOwned is ReadTrusted for a reader that is not the agent's user (purge, run as root by
// dpkg): the file must be uid's (the owner of the agent's state_dir), a regular file reached with
// no symlink, not group- or world-writable, and at most max bytes. A FIFO does not block it (it
// is opened non-blocking and refused by its type), a device or a link is not read.
func ReadOwned(path string, uid int, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, trustError(path, "is a symlink", vocab.ReasonTrustLink, uid)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkStatAs(path, fi, false, uid); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("read %s: larger than %d bytes", path, max)
	}
	return b, nil
}

// CheckFile checks a file the agent trusts without reading it; a missing file is fine.
func CheckFile(path string) error { return checkPath(path, false) }

// CheckDir checks a directory the agent writes into (state_dir, deploy_dir, releases/); a
// missing one is fine (the agent creates it).
func CheckDir(path string) error { return checkPath(path, true) }

// checkPath opens path without following a link and checks what it opened; a missing path is
// fine.
func checkPath(path string, dir bool) error {
	f, err := openNoFollow(path, dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return checkStat(path, fi, dir)
}
