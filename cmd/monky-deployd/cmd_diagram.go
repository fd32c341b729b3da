package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/tikali/monky-deployd/machine"
)

// diagramCommand is `diagram`: the state machine as a mermaid diagram.
func diagramCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:        "diagram",
		Usage:       "print the state machine as a mermaid diagram",
		Description: "Examples:\n   monky-deployd diagram > machine.mmd\n   monky-deployd diagram | mmdc -i - -o machine.svg",
		Action:      func(c *cli.Context) error { fmt.Fprint(stdout, machine.Mermaid()); return nil },
	}
}
