package main

import (
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/tikali/monky-deployd/internal/version"
	"github.com/tikali/monky-deployd/states"
)

// holdCommand is `hold`: a person holds the box — applies and heals wait, check-ins, heartbeats
// and reports go on — until a time, at most 7 days away, or until `hold --release`.
func holdCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "hold",
		Usage: "hold the box: applies and heals wait (check-ins, heartbeats and reports go on) until a time, at most 7 days",
		Description: "Examples:\n   monky-deployd hold --for 2h --reason 'db migration by hand'\n" +
			"   monky-deployd hold --until 2026-12-06T08:00:00Z --reason 'freeze for the night'\n" +
			"   monky-deployd hold --release     # end it now\n" +
			"   A hold ends by itself at its time; status, explain and the metrics (monky_deployd_held) show it.",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "for", Usage: "how long the hold lasts (such as 90m or 12h; at most 168h)"},
			&cli.StringFlag{Name: "until", Usage: "when the hold ends: an RFC 3339 time (2026-12-06T08:00:00Z)"},
			&cli.StringFlag{Name: "reason", Usage: "why the box is held: whoever finds it held reads it (required)"},
			&cli.BoolFlag{Name: "release", Usage: "end the hold now"},
		},
		Action: func(c *cli.Context) error { return cmdHold(c, stdout, stderr) },
	}
}

func cmdHold(c *cli.Context, stdout, stderr io.Writer) error {
	if c.NArg() > 0 {
		return usageErr(c, "unexpected argument %q", c.Args().First())
	}
	release, forSet, untilSet := c.Bool("release"), c.IsSet("for"), c.IsSet("until")
	switch {
	case release && (forSet || untilSet || c.IsSet("reason")):
		return usageErr(c, "--release takes no --for, --until or --reason")
	case !release && forSet == untilSet:
		return usageErr(c, "say how long with one of --for or --until (or end a hold with --release)")
	case !release && c.String("reason") == "":
		return usageErr(c, "--reason is required: whoever finds the box held reads it")
	}
	var until time.Time
	if !release {
		now := time.Now()
		if forSet {
			if c.Duration("for") <= 0 {
				return usageErr(c, "--for must be positive (got %s)", c.Duration("for"))
			}
			until = now.Add(c.Duration("for"))
		} else {
			t, err := time.Parse(time.RFC3339, c.String("until"))
			if err != nil {
				return usageErr(c, "--until %q is not an RFC 3339 time such as 2026-12-06T08:00:00Z", c.String("until"))
			}
			until = t
		}
	}
	cfg, log, st, err := setup(c, stderr)
	if err != nil {
		return err
	}
	a := &states.Agent{Cfg: cfg, Store: st, Log: log, Version: version.Version}
	var words string
	if release {
		words, err = a.ReleaseHold()
	} else {
		words, err = a.Hold(until, c.String("reason"))
	}
	if err != nil {
		return fail(1, "hold: %v", err)
	}
	fmt.Fprintln(stdout, words)
	return nil
}
