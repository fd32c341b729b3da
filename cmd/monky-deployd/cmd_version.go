package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/version"
)

// versionCommand prints the version, the commit, the Go version and the transports built in.
func versionCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version, the commit, the Go version and the transports built in",
		Description: "Examples:\n   monky-deployd version\n" +
			"   monky-deployd version --json | jq -r .default_transport",
		Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "one JSON document on stdout"}},
		Action: func(c *cli.Context) error { return printVersion(stdout, c.Bool("json")) },
	}
}

// printVersion writes what `version` prints: one JSON document, or four lines.
func printVersion(w io.Writer, asJSON bool) error {
	i := version.Get()
	if asJSON {
		return writeJSON(w, i)
	}
	fmt.Fprintf(w, "monky-deployd %s\n", i.Version)
	fmt.Fprintf(w, "commit:     %s\n", i.Commit)
	fmt.Fprintf(w, "go:         %s\n", i.Go)
	note := ""
	if !config.SDKBuiltIn {
		note = "; sdk needs a build with the OpenZiti SDK, -tags ziti"
	}
	_, err := fmt.Fprintf(w, "transports: %s (default %s%s)\n", strings.Join(i.Transports, ", "), i.DefaultTransport, note)
	return err
}
