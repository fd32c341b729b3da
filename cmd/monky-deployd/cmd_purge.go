package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/tikali/monky-deployd/effects/docker"
	"github.com/tikali/monky-deployd/effects/files"
	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/model"
	"github.com/tikali/monky-deployd/internal/sanitize"
	"github.com/tikali/monky-deployd/states/credential"
	"github.com/tikali/monky-deployd/transport"
)

// purgeCommand is `purge`, what `dpkg --purge monky-deployd` runs (packaging/scripts/
// postremove.sh) before it deletes the agent's own state: the box's OpenBao token is revoked
// at OpenBao when OpenBao answers, then deleted, and what an uninstall leaves is said — the
// deploy directory, the files in it that hold secret values, the project's running containers —
// with the one command that removes it. It stops nothing and deletes nothing but the token.
func purgeCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "purge",
		Usage: "revoke and delete the box's OpenBao token; say what an uninstall leaves (dpkg --purge runs it)",
		Description: "Examples:\n   sudo monky-deployd purge   # what dpkg --purge monky-deployd runs first\n" +
			"Nothing is stopped and nothing but the token is deleted.",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "timeout", Value: 15 * time.Second, Usage: "how long OpenBao and docker may take to answer"},
		},
		Action: func(c *cli.Context) error { return cmdPurge(c, stdout) },
	}
}

func cmdPurge(c *cli.Context, out io.Writer) error {
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	fmt.Fprintln(out, revokeToken(ctx, cfg))
	for _, line := range leftBehind(ctx, cfg) {
		fmt.Fprintln(out, line)
	}
	return nil
}

// revokeToken revokes the token at cfg.TokenPath() at OpenBao (auth/token/revoke-self) when
// OpenBao answers, deletes the file either way, and says which happened.
func revokeToken(ctx context.Context, cfg *config.Config) string {
	path := cfg.TokenPath()
	b, err := readToken(cfg.StateDir, path)
	if errors.Is(err, fs.ErrNotExist) {
		return "token: none at " + path + " (nothing to revoke)"
	}
	tok := strings.TrimSpace(string(b))
	why := ""
	switch {
	case err != nil:
		why = err.Error()
	case tok == "":
		why = "the file is empty"
	default:
		why = revokeAtBao(ctx, cfg, tok)
	}
	gone := "deleted"
	if rmErr := os.Remove(path); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
		gone = "NOT deleted (" + rmErr.Error() + ")"
	}
	if why == "" {
		return "token: revoked at OpenBao (auth/token/revoke-self), then " + gone + ": " + path
	}
	return fmt.Sprintf("token: NOT revoked (%s); %s: %s. It stays valid at OpenBao until its TTL ends: revoke it there (bao token revoke -accessor …) if this box is not trusted", why, gone, path)
}

// revokeAtBao is revoke-self over the configured transport: "" when OpenBao revoked it, else why not.
func revokeAtBao(ctx context.Context, cfg *config.Config, tok string) string {
	d, err := transport.New(transport.FromConfig(cfg))
	if err != nil {
		return "transport: " + err.Error()
	}
	host, _ := cfg.BaoHostPort()
	hc, err := transport.HTTPClient(d, host, cfg.Bao.CAFile, cfg.BaoTimeout())
	if err != nil {
		return "transport: " + err.Error()
	}
	bc, err := newBao(cfg, hc)
	if err != nil {
		return err.Error()
	}
	if err := bc.RevokeSelf(ctx, tok); err != nil {
		return "OpenBao did not revoke it: " + err.Error()
	}
	return ""
}

// readToken reads the token file the way the tick trusts it, whoever runs purge: owned by the
// state directory's owner (the agent's user), a regular file reached with no symlink, not
// group- or world-writable, at most credential.MaxBytes. A link to another file is never followed
// (its content would go to OpenBao as the token), a FIFO never blocks, a device is never read.
func readToken(stateDir, path string) ([]byte, error) {
	fi, err := os.Stat(stateDir)
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("%s: no owner", stateDir)
	}
	return files.ReadOwned(path, int(st.Uid), credential.MaxBytes)
}

// leftBehind says what stays after the purge: the deploy directory, its files holding secret
// values (each release's .env, the resolved models), the project's running containers, and the
// one command that removes them.
func leftBehind(ctx context.Context, cfg *config.Config) []string {
	dir := cfg.DeployDir
	if _, err := os.Stat(dir); err != nil {
		return []string{"left: no deploy directory at " + dir}
	}
	lines := []string{"left: " + dir + " (the deploy directory: releases/, current — the compose project of the services)"}
	var secret []string
	envs, _ := filepath.Glob(filepath.Join(dir, "releases", "*", ".env"))
	models, _ := filepath.Glob(filepath.Join(dir, model.ResolvedDirName, "*.yaml"))
	secret = append(append(secret, envs...), models...)
	if len(secret) > 0 {
		lines = append(lines, fmt.Sprintf("left: %d file(s) holding secret values: %s", len(secret), strings.Join(secret, " ")))
	}
	lines = append(lines, "left: "+runningContainers(ctx, cfg))
	lines = append(lines, fmt.Sprintf("to remove it all: cd %s && sudo docker compose -p %s down && cd / && sudo rm -rf %s",
		sanitize.ShellWord(dir+"/current"), sanitize.ShellWord(cfg.ComposeProject), sanitize.ShellWord(dir)))
	return lines
}

// runningContainers asks compose for the containers of the project by its name: the release
// tree is the agent's user's, and purge runs as root.
func runningContainers(ctx context.Context, cfg *config.Config) string {
	cs, err := docker.New(cfg.DockerBin, cfg.ComposeProject, cfg.DockerConfigDir()).ProjectPS(ctx)
	if err != nil {
		return fmt.Sprintf("the containers of project %s: compose could not say (%v)", cfg.ComposeProject, err)
	}
	var names []string
	for _, c := range cs {
		if c.State == "running" {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return "no running container of project " + cfg.ComposeProject
	}
	return fmt.Sprintf("%d running container(s) of project %s: %s", len(names), cfg.ComposeProject, strings.Join(names, " "))
}
