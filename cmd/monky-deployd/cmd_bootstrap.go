package main

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/tikali/monky-deployd/states"
)

// bootstrapCommand is `bootstrap`: log in to OpenBao with the bootstrap grant.
func bootstrapCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:        "bootstrap",
		Usage:       "log in to OpenBao with the bootstrap grant and store the token",
		Description: "Examples:\n   monky-deployd bootstrap          # only when no token is stored\n   monky-deployd bootstrap --force  # replace a working token with the grant's",
		Flags:       []cli.Flag{&cli.BoolFlag{Name: "force", Usage: "log in even when a token is stored"}},
		Action:      func(c *cli.Context) error { return cmdBootstrap(c, stdout, stderr) },
	}
}

func cmdBootstrap(c *cli.Context, stdout, stderr io.Writer) error {
	cfg, log, st, err := setup(c, stderr)
	if err != nil {
		return err
	}
	a, err := newAgent(cfg, log, st)
	if err != nil {
		return err
	}
	if err := a.BootstrapCommand(context.Background(), c.Bool("force")); err != nil {
		return &exitError{code: states.ExitCode(err), msg: err.Error()}
	}
	fmt.Fprintln(stdout, "token stored at "+cfg.TokenPath())
	return nil
}
