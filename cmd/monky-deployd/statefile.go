package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/tikali/monky-deployd/machine/explain"
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
// named as such, with what the next `run` does with it — or, for a copy the agent already moved
// aside, that the box runs on a fresh file.
func corruptOr(err error, path string) error {
	var ce *store.CorruptError
	if errors.As(err, &ce) {
		if movedAsideName(path) {
			return fail(1, "state file %s is corrupt: %s — it is a copy the agent already moved aside; the box runs on a fresh state file beside it", path, ce.Problem)
		}
		return fail(1, "state file %s is corrupt: %s — the next `monky-deployd run` moves it aside to %s.corrupt-<UTC time> and starts afresh", path, ce.Problem, path)
	}
	return fail(1, "state file %s: %v", path, err)
}

// movedAsideName: path is named as a state file the agent moved aside (<path>.corrupt-<time>).
func movedAsideName(path string) bool {
	return strings.Contains(filepath.Base(path), corruptMark)
}

// openCopy opens a copy of a state file read-only, once store.CheckCopy found it one. A corrupt copy is read as far as it can be
// (store.Salvage: through an older meta page when the newest is broken), from a scratch copy
// that cleanup removes; words then say how it was read and what the reading lacks ("" for a
// sound copy).
func openCopy(path string) (st *store.Bolt, words string, salvaged *store.Salvaged, cleanup func(), err error) {
	cleanup = func() {}
	if err := store.CheckCopy(path); err != nil { // a FIFO, a device, a huge or sparse file
		return nil, "", nil, cleanup, err
	}
	st, err = store.OpenBolt(path, store.BoltOptions{ReadOnly: true})
	var ce *store.CorruptError
	if err == nil || !errors.As(err, &ce) {
		return st, "", nil, cleanup, err
	}
	dir, derr := os.MkdirTemp("", "monky-deployd-salvage-")
	if derr != nil {
		return nil, "", nil, cleanup, corruptOr(err, path)
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	b, s, serr := store.Salvage(path, dir)
	if serr != nil {
		cleanup()
		return nil, "", nil, func() {}, corruptOr(err, path)
	}
	if s.Problem == "" {
		s.Problem = ce.Problem
	}
	return b, explain.SalvageWords(path, s, movedAsideName(path)), &s, cleanup, nil
}

// writeMovedAside says, above explain, that this state file replaced a corrupt one and what it
// lost.
func writeMovedAside(b *strings.Builder, m *store.MovedAside) {
	if m == nil {
		return
	}
	fmt.Fprintf(b, "%s\n\n", explain.MovedAsideWords(m))
}
