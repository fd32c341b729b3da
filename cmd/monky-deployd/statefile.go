package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/tikali/monky-deployd/store"
)

// What status and explain share when they read a state file or a copy of one.

// asOf is --as-of: the time a copy is read as of (zero: its newest tick). Only with
// --state-file: the box's own file is read as of now.
func asOf(c *cli.Context) (time.Time, error) {
	v := c.String("as-of")
	if v == "" {
		return time.Time{}, nil
	}
	if c.String("state-file") == "" {
		return time.Time{}, usageErr(c, "--as-of reads a copy: give --state-file FILE")
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usageErr(c, "--as-of %q is not an RFC 3339 time (2026-12-01T14:05:00Z)", v)
	}
	return t, nil
}

// corruptOr is status's and explain's word on a state file they cannot open: a corrupt one is
// named as such, with what the next `run` does with it.
func corruptOr(err error, path string) error {
	var ce *store.CorruptError
	if errors.As(err, &ce) {
		return fail(1, "state file %s is corrupt: %s — the next `monky-deployd run` moves it aside to %s.corrupt-<UTC time> and starts afresh", path, ce.Problem, path)
	}
	return fail(1, "state file %s: %v", path, err)
}

// writeMovedAside says, above status and explain, that this state file replaced a corrupt one.
func writeMovedAside(b *strings.Builder, m *store.MovedAside) {
	if m == nil {
		return
	}
	fmt.Fprintf(b, "state file: started afresh at %s; the corrupt one (%s) is kept at %s\n\n", m.At.UTC().Format(time.RFC3339), m.Problem, m.Path)
}
