package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/internal/sanitize"
)

func checkConfigCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "config",
		Usage:     "validate a config.yaml: every problem, one line each with its line and key",
		ArgsUsage: "[FILE]",
		Description: "FILE defaults to the --config path. The config is read as every command reads it; a transport\n" +
			"   this build does not carry is a problem too. Nothing but FILE and the unit's ReadWritePaths= (systemctl\n" +
			"   show monky-deployd.service, drop-ins included; the shipped unit's when systemd cannot say) is read. A\n" +
			"   setting that loads but makes the box always red or silent under the units (stale_after_s below two\n" +
			"   ticks, state_dir under /tmp, a deploy_dir the unit may not write, no metrics_path, …) is a `warning:`\n" +
			"   line: exit 0, or 1 with --strict.\n\n" +
			"Examples:\n   monky-deployd check config\n   monky-deployd check config --strict /etc/monky-deployd/config.yaml.new",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "strict", Usage: "the warnings are errors: exit 1 (the Ansible role and postinst check with it)"},
		},
		Action: func(c *cli.Context) error { return cmdCheckConfig(c, stdout) },
	}
}

func cmdCheckConfig(c *cli.Context, stdout io.Writer) error {
	if c.NArg() > 1 {
		return usageErr(c, "unexpected argument %q", c.Args().Get(1))
	}
	path := c.Args().First()
	if path == "" {
		path = c.String("config")
	}
	cfg, errs := config.LoadAll(path)
	if len(errs) == 0 && !config.TransportBuiltIn(cfg.Transport) {
		errs = append(errs, &config.Error{Path: path, Line: keyLine(path, "transport"), Key: "transport",
			Msg: fmt.Sprintf("transport %s is not in this build (it has %v): `make sdk` builds one with the OpenZiti SDK, or set transport: system or proxy",
				cfg.Transport, config.BuiltInTransports())})
	}
	if len(errs) > 0 {
		// in the file's order, as config.ParseAll reports them
		for _, e := range errs {
			fmt.Fprintln(stdout, sanitize.Line(e.Error()))
		}
		return &exitError{code: 1}
	}
	warns := configWarnings(cfg, path)
	for _, w := range warns {
		at := ""
		if w.line > 0 {
			at = fmt.Sprintf("line %d: ", w.line)
		}
		fmt.Fprintln(stdout, sanitize.Line(fmt.Sprintf("warning: config %s: %s%s", path, at, w.msg)))
	}
	if len(warns) > 0 && c.Bool("strict") {
		fmt.Fprintf(stdout, "config %s: %d warning(s), errors with --strict\n", path, len(warns))
		return &exitError{code: 1}
	}
	_, err := fmt.Fprintf(stdout, "config %s: ok (env %s, site %s, transport %s)\n", path, cfg.EnvID, cfg.Site, cfg.Transport)
	return err
}

// keyLine is the line of a top-level key in the YAML file at path, 0 when it is not there.
func keyLine(path, key string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	var doc yaml.Node
	if yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc) != nil || len(doc.Content) == 0 {
		return 0
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == key {
			return root.Content[i].Line
		}
	}
	return 0
}
