package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/states"
	"github.com/tikali/monky-deployd/store"
)

// statusCommand is `status`: where the box stands, read-only, with an exit status that says
// whether it needs a person.
func statusCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "where the box stands (read-only)",
		ArgsUsage: "[FILE|DIR ...]",
		Description: "Exit status: 0 when the box is converged or working on it (in flight, retrying, waiting on\n" +
			"   the lease budget, a temporary fault younger than stuck_after_s); 1 when it needs a person\n" +
			"   (Refused, Blocked, a parked Failed, an unhealthy service, a fault every tick repeats, a\n" +
			"   temporary fault older than stuck_after_s, no tick for stale_after_s) or the state file is\n" +
			"   missing or unreadable.\n\n" +
			"Examples:\n   monky-deployd status\n   monky-deployd status --json | jq .lease_budget\n" +
			"   monky-deployd status --quiet || echo 'this box needs a person'\n" +
			"   monky-deployd status --state-file ./state.db   # a copy a box sent to support; no config needed\n" +
			"   monky-deployd status --state-file ./copies/    # many copies: one line per box, who needs a person first",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "one JSON document on stdout"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print nothing; only the exit status says whether the box needs a person"},
			&cli.StringFlag{Name: "state-file", Usage: "read this copy of a state file instead of the config's (as of its newest tick; writes nothing); several files or a directory of copies: one line per box, the ones that need a person first"},
			&cli.StringFlag{Name: "as-of", Usage: "with --state-file FILE|DIR ...: read the copies as of this RFC 3339 time (when the box sent it) instead of its newest tick, so a box whose timer stopped reads stale"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("quiet") {
				return quiet(cmdStatus(c, io.Discard))
			}
			return cmdStatus(c, stdout)
		},
	}
}

func cmdStatus(c *cli.Context, stdout io.Writer) error {
	if path := c.String("state-file"); path != "" {
		if more := c.Args().Slice(); triageWanted(path, more) {
			paths, asJSON, v := triageArgs(path, more, c.Bool("json"), c.String("as-of"))
			at, err := parseAsOf(c, v)
			if err != nil {
				return err
			}
			return statusCopies(paths, asJSON, at, stdout) // triage.go
		}
		return statusCopy(c, path, stdout)
	}
	if c.NArg() > 0 {
		return usageErr(c, "unexpected argument %q", c.Args().First())
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	st, err := store.OpenBolt(cfg.StatePath(), store.BoltOptions{ReadOnly: true})
	if err != nil {
		if os.IsNotExist(errors.Unwrap(err)) || errors.Is(err, os.ErrNotExist) {
			return fail(1, "no state file at %s: no tick has run yet%s", cfg.StatePath(), privateTmp(cfg.StateDir))
		}
		return corruptOr(err, cfg.StatePath())
	}
	present, untrusted := tokenFile(cfg.TokenPath())
	lim := explain.LimitsOf(cfg)
	lim.TickRunning = states.TickRunning(cfg.LockPath())
	s, err := explain.BuildStatusWith(st, time.Now(), &present, lim)
	if err != nil {
		return fail(1, "status: %v", err)
	}
	if untrusted != "" {
		s.Token.Present, s.Token.Untrusted = false, untrusted
		s.Token.Source, s.Token.ExpiresAt, s.Token.Expired = "", nil, false
	}
	return printStatus(stdout, s, c.Bool("json"))
}

// statusCopy is `status --state-file`: a copy read as of its newest tick, with no config, no
// lock file and nothing about the machine that reads it (its token, its lock).
func statusCopy(c *cli.Context, path string, stdout io.Writer) error {
	if _, err := os.Stat(path); err != nil {
		return fail(1, "no state file at %s: %v", path, err)
	}
	st, words, salvaged, cleanup, err := openCopy(path) // statefile.go
	if err != nil {
		return corruptOr(err, path)
	}
	defer cleanup()
	at, err := asOf(c)
	if err != nil {
		return err
	}
	s, err := explain.BuildStatusCopyAsOf(st, at)
	if err != nil {
		return fail(1, "status: %v", err)
	}
	s.Salvaged = salvaged
	if words != "" && !c.Bool("json") {
		printText(stdout, words+"\n\n")
	}
	return printStatus(stdout, s, c.Bool("json"))
}

// printStatus writes s, as one JSON document or as text, and returns status's exit code.
func printStatus(stdout io.Writer, s explain.Status, asJSON bool) error {
	if asJSON {
		if err := writeJSON(stdout, s); err != nil {
			return err
		}
		return statusExit(s)
	}
	var b strings.Builder
	explain.WriteStatusText(&b, s)
	printText(stdout, b.String())
	return statusExit(s)
}

// statusExit is status's exit code, read from the one verdict: 0 when the box is converged or
// working on it (in flight, retrying, a temporary fault younger than stuck_after_s, the lease
// budget refilling), 1 when it needs a person (explain.NeedsPerson). A missing or unreadable
// state file is 1 as well (cmdStatus returns before it gets here).
func statusExit(s explain.Status) error {
	if s.NeedsPerson() {
		return &exitError{code: 1}
	}
	return nil
}

// quiet keeps an error's exit code and drops its words (status --quiet prints nothing).
func quiet(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return &exitError{code: ee.code}
	}
	return &exitError{code: 1}
}

// privateTmp is what status adds when state_dir lies under /tmp or /var/tmp: the unit runs with
// PrivateTmp=yes, so the timer's ticks write to a /tmp of their own that no shell sees.
func privateTmp(stateDir string) string {
	for _, tmp := range []string{"/tmp", "/var/tmp"} {
		if stateDir == tmp || strings.HasPrefix(stateDir, tmp+"/") {
			return fmt.Sprintf(" here — but state_dir %s is under %s, which monky-deployd.service makes private to the unit (PrivateTmp=yes): its ticks write to a %s no shell sees; set state_dir outside it (default /var/lib/monky-deployd)", stateDir, tmp, tmp)
		}
	}
	return ""
}

// tokenFile says whether the token file is there and, when it is but the agent would not read
// it, why: not a regular file (a symlink, a FIFO…) or group- or world-writable — the shape the
// agent's trust rules refuse whoever runs status (its owner is the journal's to say: it
// depends on the agent's user). It follows no symlink and opens nothing.
func tokenFile(path string) (present bool, untrusted string) {
	fi, err := os.Lstat(path)
	switch {
	case err != nil:
		return false, ""
	case fi.Mode()&os.ModeSymlink != 0:
		return true, path + " is a symlink"
	case !fi.Mode().IsRegular():
		return true, fmt.Sprintf("%s is not a regular file (%s)", path, fi.Mode().Type())
	case fi.Mode().Perm()&0o022 != 0:
		return true, fmt.Sprintf("%s is group- or world-writable (%04o)", path, fi.Mode().Perm())
	}
	return true, ""
}
