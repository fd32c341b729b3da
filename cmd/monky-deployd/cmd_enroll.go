package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/transport"
)

// enrollTimeout bounds the enrolment: the controller's certificate and CAs, then the signing.
const enrollTimeout = 60 * time.Second

// maxJWTBytes bounds the enrolment JWT read: one is about 1 KiB.
const maxJWTBytes = 64 << 10

// enrollCommand is `enroll`: the box's ziti identity from an enrolment JWT, with the SDK's own
// enrolment (the sdk build only), written where the config's `identity:` says.
func enrollCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "enroll",
		Usage: "enrol the box's OpenZiti identity from its enrolment JWT (the sdk build): written 0600 at the config's identity path",
		Description: "Examples:\n   sudo -u monky-deployd monky-deployd enroll --jwt /tmp/monky-host.env-qa-02.jwt\n" +
			"   sudo -u monky-deployd monky-deployd enroll --jwt FILE --force   # replace an identity that still loads\n" +
			"   The identity is written 0600, owned by the user that runs it, at `identity:` (default\n" +
			"   /opt/openziti/etc/identities/monky-host.<env_id>.json), and the JWT is deleted. An identity\n" +
			"   there that loads is replaced only with --force; one that does not load is replaced.\n" +
			"   The default build has no OpenZiti SDK and refuses (SDK_UNAVAILABLE).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "jwt", Usage: "the enrolment JWT `FILE` (ziti edge create identity NAME -o FILE writes one); deleted on success"},
			&cli.BoolFlag{Name: "force", Usage: "replace an identity that still loads"},
		},
		Action: func(c *cli.Context) error { return cmdEnroll(c, stdout, stderr) },
	}
}

func cmdEnroll(c *cli.Context, stdout, stderr io.Writer) error {
	if c.NArg() > 0 {
		return usageErr(c, "unexpected argument %q", c.Args().First())
	}
	jwtPath := c.String("jwt")
	if jwtPath == "" {
		return usageErr(c, "--jwt FILE is required: the box's enrolment JWT")
	}
	if !config.SDKBuiltIn {
		_, err := transport.Enroll(c.Context, "")
		return fail(1, "%v", err)
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	if err := wrongUser(c, cfg); err != nil {
		return err
	}
	path := cfg.Identity
	if _, err := os.Lstat(path); err == nil {
		cerr := transport.CheckSDKIdentity(path)
		if cerr == nil && !c.Bool("force") {
			return fail(1, "enroll: %s already holds an identity that loads: it is kept, and the JWT %s too (enroll --force replaces it)", path, jwtPath)
		}
		if cerr != nil {
			fmt.Fprintf(stderr, "enroll: replacing %s, which does not load: %v\n", path, cerr)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fail(1, "enroll: identity %s: %v", path, errors.Unwrap(err))
	}
	token, err := readJWT(jwtPath)
	if err != nil {
		return fail(1, "enroll: %v", err)
	}
	ctx, cancel := context.WithTimeout(c.Context, enrollTimeout)
	defer cancel()
	out, err := transport.Enroll(ctx, token)
	if err != nil {
		return fail(1, "enroll: %v (nothing was written; the JWT %s is kept)", err, jwtPath)
	}
	if err := writeIdentity(path, out); err != nil {
		return fail(1, "enroll: the controller enrolled the identity but it was not written: %v (the JWT is spent: create a new one)", err)
	}
	var id struct {
		ZtAPI string `json:"ztAPI"`
	}
	_ = json.Unmarshal(out, &id)
	fmt.Fprintf(stdout, "enrolled: identity %s (controller %s), mode 0600\n", path, id.ZtAPI)
	if err := os.Remove(jwtPath); err != nil {
		fmt.Fprintf(stderr, "enroll: the JWT %s was not deleted: %v (it is spent: delete it)\n", jwtPath, errors.Unwrap(err))
	} else {
		fmt.Fprintf(stdout, "deleted the JWT %s\n", jwtPath)
	}
	return nil
}

// readJWT reads the enrolment JWT at path: a regular file of at most maxJWTBytes, not empty.
func readJWT(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("the JWT %s: %v", path, errors.Unwrap(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("the JWT %s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxJWTBytes+1))
	if err != nil {
		return "", fmt.Errorf("the JWT %s: %v", path, err)
	}
	if len(b) > maxJWTBytes {
		return "", fmt.Errorf("the JWT %s is larger than an enrolment JWT (%d bytes at most)", path, maxJWTBytes)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("the JWT %s is empty", path)
	}
	return token, nil
}

// writeIdentity replaces path with the identity out, 0600: a temp file beside it, checked as
// the sdk transport loads it, fsynced, renamed over path, the directory fsynced. The directory
// is created 0700 when missing.
func writeIdentity(path string, out []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, files.TempPrefix(path)+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.Write(out); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := transport.CheckSDKIdentity(tmp); err != nil {
		return fmt.Errorf("the enrolled identity does not load: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return files.SyncDirFS(files.OS, dir)
}
