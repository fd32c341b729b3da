package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// A usage error is one line on stderr naming what is wrong and where the help is, and exit 1:
//
//	monky-deployd: explain: -n must be 1 or more (got 0); see 'monky-deployd help explain'
//
// never the whole help, never on stdout.

// usageErr is the usage error of the command c runs.
func usageErr(c *cli.Context, format string, args ...any) error {
	name := ""
	if c != nil && c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		name = c.Command.Name
	}
	return usageLine(name, fmt.Sprintf(format, args...))
}

func usageLine(cmd, what string) error {
	if cmd == "" {
		return &exitError{code: 1, msg: what + "; see 'monky-deployd help'"}
	}
	return &exitError{code: 1, msg: cmd + ": " + what + "; see 'monky-deployd help " + cmd + "'"}
}

// onUsageError turns the flag package's words into the usage line.
func onUsageError(c *cli.Context, err error, _ bool) error {
	return usageErr(c, "%s", flagErrorWords(err.Error()))
}

func flagErrorWords(msg string) string {
	if f, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return "unknown flag " + dashes(f)
	}
	if f, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return "flag " + dashes(f) + " needs a value"
	}
	// invalid value "x" for flag -n: parse error
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		if v, f, ok := strings.Cut(rest, " for flag "); ok {
			f, _, _ = strings.Cut(f, ":")
			return "flag " + dashes(f) + ": invalid value " + v
		}
	}
	// the help command's: No help topic for 'x'
	if topic, ok := strings.CutPrefix(msg, "No help topic for "); ok {
		return fmt.Sprintf("unknown command %q", strings.Trim(topic, "'"))
	}
	return msg
}

// dashes writes a flag as it is documented: -n for one letter, --name otherwise.
func dashes(f string) string {
	n := strings.TrimLeft(f, "-")
	if len(n) == 1 {
		return "-" + n
	}
	return "--" + n
}

// strict makes every command of app answer usage errors with one line: a bad flag, and
// arguments to a command that takes none.
func strict(app *cli.App) {
	app.OnUsageError = onUsageError
	for _, cmd := range app.Commands {
		cmd.OnUsageError = onUsageError
		if cmd.ArgsUsage != "" || cmd.Action == nil {
			continue
		}
		action := cmd.Action
		cmd.Action = func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErr(c, "unexpected argument %q", c.Args().First())
			}
			return action(c)
		}
	}
}
