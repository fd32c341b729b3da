//go:build urfave_cli_no_docs

package main

import (
	"io"

	"github.com/urfave/cli/v2"
)

// manCommand is absent from the shipped agent (built with -tags urfave_cli_no_docs): the man
// page comes from a build that keeps the docs (`make man`).
func manCommand(io.Writer) *cli.Command { return nil }
