//go:build !urfave_cli_no_docs

package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"
)

// The man page is generated from the command definitions by a build that keeps urfave/cli's
// docs (`make man` runs `go run ./cmd/monky-deployd man`); the shipped agent is built with
// -tags urfave_cli_no_docs, which drops the generator and its markdown libraries, and has no
// `man` command.

// manPage renders the page (section 8: a system daemon): the library's NAME, DESCRIPTION,
// GLOBAL OPTIONS and COMMANDS, with a SYNOPSIS built from the commands, each command a
// subsection, and the EXIT STATUS, FILES, ENVIRONMENT and SEE ALSO sections.
func manPage(app *cli.App) (string, error) {
	s, err := app.ToManWithSection(8)
	if err != nil {
		return "", fmt.Errorf("man page: %w", err)
	}
	s = strings.TrimLeft(s, "\n") // man(1) wants .TH first
	head, cmds, ok := strings.Cut(s, ".SH COMMANDS\n")
	if !ok {
		return "", fmt.Errorf("man page: no COMMANDS section")
	}
	// each command a subsection of COMMANDS
	cmds = regexp.MustCompile(`(?m)^\.SH `).ReplaceAllString(cmds, ".SS ")
	syn := regexp.MustCompile(`(?s)\.SH SYNOPSIS\n.*?\n\n\n`)
	if !syn.MatchString(head) {
		return "", fmt.Errorf("man page: no SYNOPSIS section")
	}
	head = syn.ReplaceAllLiteralString(head, synopsis(app)+"\n\n")
	page := head + ".SH COMMANDS\n" + strings.TrimRight(cmds, "\n") + "\n\n" + manSections
	// a blank line is roff for an empty output line: paragraphs are the macros' business
	return regexp.MustCompile(`\n{2,}`).ReplaceAllString(page, "\n"), nil
}

// synopsis is one line per visible command (per subcommand of one that has them) with its flags.
func synopsis(app *cli.App) string {
	var b strings.Builder
	b.WriteString(".SH SYNOPSIS\n")
	first := true
	line := func(name string, c *cli.Command) {
		if !first {
			b.WriteString(".br\n")
		}
		first = false
		b.WriteString(`\fBmonky-deployd\fR [\fB\-\-config\fR \fIPATH\fR] \fB` + name + `\fR`)
		for _, f := range c.Flags {
			n := f.Names()[0]
			dash := `\-\-`
			if len(n) == 1 {
				dash = `\-`
			}
			if _, ok := f.(*cli.BoolFlag); ok {
				fmt.Fprintf(&b, ` [\fB%s%s\fR]`, dash, roffDash(n))
			} else {
				fmt.Fprintf(&b, ` [\fB%s%s\fR \fI%s\fR]`, dash, roffDash(n), strings.ToUpper(strings.ReplaceAll(n, "-", "_")))
			}
		}
		if c.ArgsUsage != "" {
			b.WriteString(" " + roffDash(c.ArgsUsage))
		}
		b.WriteString("\n")
	}
	for _, c := range app.Commands {
		if c.Hidden {
			continue
		}
		if len(c.Subcommands) == 0 {
			line(c.Name, c)
		}
		for _, s := range c.Subcommands {
			line(c.Name+" "+s.Name, s)
		}
	}
	b.WriteString(".br\n" + `\fBmonky-deployd\fR \fB\-\-version\fR` + "\n")
	return b.String()
}

func roffDash(s string) string { return strings.ReplaceAll(s, "-", `\-`) }

const manSections = `.SH EXIT STATUS
.TP
.B 0
converged, or heartbeat sent; also: another tick holds the lock; offline in laptop_mode.
.TP
.B 75
temporary (mesh down, tenancy or OpenBao unreachable or 5xx, 429, the lease budget spent, a
report still in the outbox, the tick's deadline); the next tick resumes.
The unit has SuccessExitStatus=75.
.TP
.B 78
AGENT_ENV_MISMATCH: the token is pinned to another env than the config; never retried, loop mode exits.
.TP
.B 1
a refusal, a failure, a block, a TLS or identity fault, a configuration error; and a usage error
(an unknown command or flag, a bad value, an extra argument), which prints one line naming what
is wrong and the help to read.
.PP
.B status
exits 0 when the box is converged or working on it (in flight, retrying, waiting on the lease
budget, a temporary fault younger than stuck_after_s) and 1 when it needs a person (Refused,
Blocked, a parked Failed, an unhealthy service, a fault every tick repeats, a temporary fault
older than stuck_after_s, no tick for stale_after_s) or the state file is missing or unreadable; with \fB\-\-quiet\fR it prints nothing and only sets the code.
.SH FILES
.TP
.I /usr/bin/monky\-deployd
the agent: what the timer runs, what an operator types, and what every suite tests.
.TP
.I /etc/monky\-deployd/config.yaml
the configuration, read strictly.
.TP
.I /etc/monky\-deployd/bootstrap.jwt
the install kit's grant, until the first login.
.TP
.I /var/lib/monky\-deployd/
state_dir: bao.token, state.db (state, journal, lease budget, outbox; no secret), lock,
docker/config.json, metrics.json (the metrics counters).
.TP
.I /var/lib/prometheus/node\-exporter/monky_deployd.prom
the metrics textfile, when metrics_path names it.
.SH ENVIRONMENT
.TP
.B MONKY_DEPLOYD_CONFIG
the configuration's path (\fB\-\-config\fR wins).
.TP
.B JOURNAL_STREAM
set by systemd: log lines carry a <N> syslog priority so journalctl \-p works.
.TP
.B NO_COLOR
plain log output on a terminal.
.SH SEE ALSO
.BR systemctl (1),
.BR journalctl (1),
.BR systemd.timer (5),
.BR docker\-compose (1);
docs/OPERATIONS.md ("Reading the journal" has the one command that fixes or checks each line).
`

func manCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:   "man",
		Usage:  "print the man page (roff), generated from the command definitions",
		Hidden: true,
		Description: "Examples:\n   monky-deployd man > packaging/man/monky-deployd.8   # what `make man` runs\n" +
			"   monky-deployd man | man -l -",
		Action: func(c *cli.Context) error {
			s, err := manPage(c.App)
			if err != nil {
				return fail(1, "%v", err)
			}
			_, err = fmt.Fprint(stdout, s)
			return err
		},
	}
}
