package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/states"
	"github.com/tikali/monky-deployd/store"
)

// explainCommand is `explain`: the last ticks' transitions and what happens next, read-only.
func explainCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "explain",
		Usage: "why the box is where it is: the last ticks' transitions and what happens next",
		Description: "Examples:\n   monky-deployd explain\n   monky-deployd explain -n 5 --json\n" +
			"   monky-deployd explain --state-file ./state.db   # a copy a box sent to support; no config needed\n" +
			"   monky-deployd explain --ndjson > journal.ndjson  # the whole journal, to attach to a ticket",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "one JSON document on stdout (schema v1, with `why`)"},
			&cli.BoolFlag{Name: "ndjson", Usage: "every journal entry, one JSON object per line, for a post-mortem or a ticket"},
			&cli.IntFlag{Name: "n", Value: 20, Usage: "how many ticks"},
			&cli.DurationFlag{Name: "since", Usage: "only ticks of the last DURATION (e.g. 1h)"},
			&cli.StringFlag{Name: "state-file", Usage: "read this copy of a state file instead of the config's"},
			&cli.StringFlag{Name: "as-of", Usage: "with --state-file: read the copy as of this RFC 3339 time (when the box sent it) instead of its newest tick"},
		},
		Action: func(c *cli.Context) error { return cmdExplain(c, stdout) },
	}
}

func cmdExplain(c *cli.Context, stdout io.Writer) error {
	if n := c.Int("n"); n < 1 {
		return usageErr(c, "-n must be 1 or more (got %d)", n)
	}
	cfg, src, err := explainSource(c)
	if err != nil {
		return err
	}
	defer src.cleanup()
	st := src.st
	now := time.Now()
	at, err := asOf(c)
	if err != nil {
		return err
	}
	o := explain.Options{N: c.Int("n"), Now: now, Since: c.Duration("since"), Copy: c.String("state-file") != "", AsOf: at, Limits: explain.LimitsOf(cfg)}
	if cfg != nil {
		o.Limits.TickRunning = states.TickRunning(cfg.LockPath())
	}
	if c.Bool("ndjson") {
		return writeJournal(stdout, st, o)
	}
	doc, err := explain.Build(st, o)
	if err != nil {
		return fail(1, "explain: %v", err)
	}
	doc.Salvaged = src.salvaged
	if c.Bool("json") {
		return writeJSON(stdout, doc)
	}
	var b strings.Builder
	if src.words != "" {
		fmt.Fprintf(&b, "%s\n\n", src.words)
	}
	writeMovedAside(&b, doc.MovedAside)
	explain.WriteText(&b, doc)
	printText(stdout, b.String())
	return nil
}

// explainSource opens the state file explain reads, read-only: --state-file's copy (and no
// config: cfg is nil), else the config's.
func explainSource(c *cli.Context) (*config.Config, *copySource, error) {
	path := c.String("state-file")
	var cfg *config.Config
	if path == "" {
		var err error
		if cfg, err = loadConfig(c); err != nil {
			return nil, nil, err
		}
		path = cfg.StatePath()
	}
	if _, err := os.Stat(path); err != nil {
		return nil, nil, fail(1, "no state file at %s: %v", path, err)
	}
	if cfg != nil {
		// the box's own file: a corrupt one is the next run's to move aside
		st, err := store.OpenBolt(path, store.BoltOptions{ReadOnly: true})
		if err != nil {
			return nil, nil, corruptOr(err, path)
		}
		return cfg, &copySource{st: st, cleanup: func() {}}, nil
	}
	st, words, salvaged, cleanup, err := openCopy(path) // statefile.go
	if err != nil {
		return nil, nil, corruptOr(err, path)
	}
	return nil, &copySource{st: st, words: words, salvaged: salvaged, cleanup: cleanup}, nil
}

// copySource is a state file opened for reading, with the words on a corrupt copy's reading.
type copySource struct {
	st       *store.Bolt
	words    string
	salvaged *store.Salvaged
	cleanup  func()
}

// writeJournal is `explain --ndjson`: every journal entry, one JSON object per line.
func writeJournal(stdout io.Writer, st store.Store, o explain.Options) error {
	var b strings.Builder
	if err := explain.WriteNDJSONWith(&b, st, o); err != nil {
		return fail(1, "explain: %v", err)
	}
	_, err := fmt.Fprint(stdout, b.String())
	return err
}
