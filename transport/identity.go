package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"github.com/tikali/monky-deployd/internal/vocab"
)

// maxIdentityBytes bounds the identity read: a ziti identity is a few KiB of JSON.
const maxIdentityBytes = 1 << 20

// CheckIdentity checks that the box's ziti identity at path exists, is readable by this user
// and is a ziti identity (JSON with `ztAPI` and `id`). The ziti SDK accepts a broken identity
// and fails later, at dial, in words that point at the mesh; this names the real fault.
// The error is an *Error, Code IDENTITY_UNUSABLE. It never quotes the
// file's content (it holds the identity's private key).
func CheckIdentity(path string) error {
	return checkIdentity("", path)
}

func checkIdentity(transport, path string) error {
	raw, _, err := readIdentity(transport, path)
	if err != nil {
		return err
	}
	if reason := notZitiIdentity(raw); reason != "" {
		return &Error{Op: identityOp(transport), Code: vocab.IdentityUnusable,
			Msg:  fmt.Sprintf("identity %s is not a ziti identity (%s)", path, reason),
			Hint: "re-enrol the identity; a ziti identity file is JSON with `ztAPI` and `id`"}
	}
	return nil
}

func identityOp(transport string) string {
	if transport == "" {
		return "transport"
	}
	return "transport " + transport
}

// readIdentity reads the identity file at path as this user and returns its bytes and mode.
// What keeps the agent from the file (no `identity:`, absent, not readable, not a regular file,
// larger than a ziti identity) is an *Error, Code IDENTITY_UNUSABLE.
func readIdentity(transport, path string) ([]byte, fs.FileMode, error) {
	fail := func(msg, hint string, err error) ([]byte, fs.FileMode, error) {
		return nil, 0, &Error{Op: identityOp(transport), Code: vocab.IdentityUnusable, Msg: msg, Hint: hint, Err: err}
	}
	if path == "" {
		return fail("no identity configured (`identity:` is empty)", "", nil)
	}
	f, err := os.Open(path)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fail(fmt.Sprintf("identity %s does not exist", path),
				"enrol the box's identity (install kit) or fix `identity:`", err)
		case errors.Is(err, fs.ErrPermission):
			return fail(fmt.Sprintf("identity %s is not readable by this user (%s)", path, whoAmI()),
				fmt.Sprintf("add the agent's user to the file's group: `usermod -a -G %s monky-deployd` "+
					"(the tunneller rewrites the file on a controller refresh and drops POSIX ACLs, "+
					"so group membership is the grant that survives)", fileGroup(path)), err)
		}
		return fail(fmt.Sprintf("identity %s is unreadable: %v", path, errors.Unwrap(err)), "", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fail(fmt.Sprintf("identity %s is unreadable: %v", path, errors.Unwrap(err)), "", err)
	}
	if !st.Mode().IsRegular() {
		return fail(fmt.Sprintf("identity %s is not a regular file", path), "", nil)
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxIdentityBytes+1))
	if err != nil {
		return fail(fmt.Sprintf("identity %s is unreadable: %v", path, errors.Unwrap(err)), "", err)
	}
	if len(raw) > maxIdentityBytes {
		return fail(fmt.Sprintf("identity %s is not a ziti identity (larger than %d bytes)", path, maxIdentityBytes), "", nil)
	}
	return raw, st.Mode(), nil
}

// notZitiIdentity says why raw is not a ziti identity, "" when it is one. It names keys and
// offsets only, never content.
func notZitiIdentity(raw []byte) string {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Sprintf("not JSON: syntax error at byte %d", se.Offset)
		}
		if len(strings.TrimSpace(string(raw))) == 0 {
			return "empty file"
		}
		return "not a JSON object"
	}
	var missing []string
	var api string
	if json.Unmarshal(doc["ztAPI"], &api) != nil || api == "" {
		missing = append(missing, "ztAPI")
	}
	var id map[string]json.RawMessage
	if json.Unmarshal(doc["id"], &id) != nil || id == nil {
		missing = append(missing, "id")
	}
	if len(missing) > 0 {
		return "JSON without " + strings.Join(missing, " and ")
	}
	return ""
}

// whoAmI is "uid N, groups a, b" for the running process.
func whoAmI() string {
	s := "uid " + strconv.Itoa(os.Geteuid())
	gids, err := os.Getgroups()
	if err != nil || len(gids) == 0 {
		return s + ", groups " + groupName(os.Getegid())
	}
	names := make([]string, 0, len(gids))
	for _, g := range gids {
		names = append(names, groupName(g))
	}
	return s + ", groups " + strings.Join(names, ", ")
}

func groupName(gid int) string {
	if g, err := user.LookupGroupId(strconv.Itoa(gid)); err == nil {
		return g.Name
	}
	return strconv.Itoa(gid)
}

// fileGroup is the name of the group owning path; "ziti" when it cannot be told or is root's
// (never advise joining root's group).
func fileGroup(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "ziti"
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Gid != 0 {
		if g, err := user.LookupGroupId(strconv.Itoa(int(sys.Gid))); err == nil {
			return g.Name
		}
	}
	return "ziti"
}
