package main

import (
	"io"

	"github.com/urfave/cli/v2"
)

// checkCommand is `check`: validate a config.yaml or a bundle without touching anything —
// no state file, no lock, no network, no docker; nothing is created. Each subcommand prints
// one line per problem and exits 1 when there is one, 0 when there is none.
func checkCommand(stdout io.Writer) *cli.Command {
	cmd := &cli.Command{
		Name:  "check",
		Usage: "validate a config.yaml or a bundle as the tick would, touching nothing",
		Description: "Exit status: 0 when there is nothing to fix, 1 with one line per problem.\n\n" +
			"Examples:\n   monky-deployd check config                        # the --config file\n" +
			"   monky-deployd check config /tmp/new-config.yaml   # before it replaces the box's\n" +
			"   monky-deployd check bundle ./release/             # an unpacked bundle, in a publisher's CI\n" +
			"   monky-deployd check bundle --env env-qa-02 bundle.tar.gz",
		Subcommands: []*cli.Command{checkConfigCommand(stdout), checkBundleCommand(stdout)},
	}
	for _, s := range cmd.Subcommands {
		s.OnUsageError = onUsageError
	}
	return cmd
}
