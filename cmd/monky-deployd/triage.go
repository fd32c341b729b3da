package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/tikali/monky-deployd/machine/explain"
)

// Support triage of many copies: `status --state-file A B …` or `status --state-file DIR` reads
// every copy as `status --state-file` reads one (as of its newest tick, or of --as-of; no
// config; writing nothing) and prints one line per box — file, host, env, verdict, who must
// act, codes, since, and what happens next or when a retrying failure parks — ordered by who
// must act, then by how long the box has needed it. A moved-aside `*.corrupt-*` file is filed
// under the box whose state file it was. It exits 1 when one of them needs a person or cannot
// be read.

// The verdicts of a triage row: explain's one verdict, or unreadable.
const (
	verdictNeedsPerson = explain.NeedsPerson
	verdictWorking     = explain.Working
	verdictConverged   = explain.Converged
	verdictUnreadable  = "unreadable" // not a state file the agent can read: a person looks
)

// triageRow is one copy's line (and `--json` element).
type triageRow struct {
	File    string   `json:"file"`
	Host    string   `json:"host,omitempty"` // the box's name as its newest tick recorded it
	EnvID   string   `json:"env_id"`
	Verdict string   `json:"verdict"`
	Who     string   `json:"who,omitempty"` // who must act: box, publisher, openbao, tenancy
	Codes   []string `json:"codes"`
	Since   string   `json:"since,omitempty"` // RFC 3339: when the fault began (the why's since)
	// ParksAt (RFC 3339) is when a failure that still retries parks at the earliest.
	ParksAt string `json:"parks_at,omitempty"`
	State   string `json:"state,omitempty"`
	Next    string `json:"next,omitempty"`
	Error   string `json:"error,omitempty"`
	// MovedAside are the corrupt files the agent moved aside beside this box's state file.
	MovedAside []string `json:"moved_aside,omitempty"`
}

// triageWanted reports whether the state-file flag and the arguments ask for triage: more than
// one path, or a directory.
func triageWanted(path string, more []string) bool {
	if len(more) > 0 {
		return true
	}
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// triageArgs is the copies to read, whether to print JSON and the --as-of time: a --json or
// --as-of among the paths (flags after the first path are not parsed as flags) counts as the flag.
func triageArgs(first string, more []string, asJSON bool, asOf string) ([]string, bool, string) {
	paths := []string{first}
	for i := 0; i < len(more); i++ {
		a := more[i]
		switch {
		case a == "--json" || a == "-json":
			asJSON = true
		case (a == "--as-of" || a == "-as-of") && i+1 < len(more):
			asOf = more[i+1]
			i++
		case strings.HasPrefix(a, "--as-of=") || strings.HasPrefix(a, "-as-of="):
			_, asOf, _ = strings.Cut(a, "=")
		default:
			paths = append(paths, a)
		}
	}
	return paths, asJSON, asOf
}

// parseAsOf is an --as-of value: zero when empty.
func parseAsOf(c *cli.Context, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usageErr(c, "--as-of %q is not an RFC 3339 time (2026-12-01T14:05:00Z)", v)
	}
	return t, nil
}

// statusCopies is the triage of every copy under paths, each read as of at (zero: its newest
// tick).
func statusCopies(paths []string, asJSON bool, at time.Time, stdout io.Writer) error {
	files, err := copiesUnder(paths)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fail(1, "no state file under %s (a copy is a file named *.db or state.db*)", strings.Join(paths, ", "))
	}
	boxes, aside := fileAside(files)
	rows := make([]triageRow, 0, len(boxes))
	for _, f := range boxes {
		r := triageOne(f, at)
		r.MovedAside = aside[f]
		rows = append(rows, r)
	}
	sortTriage(rows)
	if asJSON {
		if err := writeJSON(stdout, rows); err != nil {
			return err
		}
	} else {
		var b strings.Builder
		writeTriage(&b, rows)
		printText(stdout, b.String())
	}
	for _, r := range rows {
		if r.Verdict == verdictNeedsPerson || r.Verdict == verdictUnreadable {
			return &exitError{code: 1}
		}
	}
	return nil
}

// sortTriage orders rows by who must act — a person before the agent, the box's own operator
// before the publisher, OpenBao and tenancy — then by how long the box has needed it (the
// oldest fault first), then by file.
func sortTriage(rows []triageRow) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if ra, rb := triageRank(a.Verdict), triageRank(b.Verdict); ra != rb {
			return ra < rb
		}
		if wa, wb := explain.WhoRank(a.Who), explain.WhoRank(b.Who); wa != wb {
			return wa < wb
		}
		if a.Since != b.Since {
			// RFC 3339 in UTC sorts as time; a row without a since goes last
			return a.Since != "" && (b.Since == "" || a.Since < b.Since)
		}
		return a.File < b.File
	})
}

// corruptMark is in the name of a state file the agent moved aside: <path>.corrupt-<UTC time>.
const corruptMark = ".corrupt-"

// fileAside splits files into the boxes' state files and the moved-aside copies filed under
// the box whose state file they were; a moved-aside copy whose box is not among files stays a
// row of its own.
func fileAside(files []string) (boxes []string, aside map[string][]string) {
	aside = map[string][]string{}
	own := map[string]bool{}
	for _, f := range files {
		if !strings.Contains(filepath.Base(f), corruptMark) {
			own[f] = true
		}
	}
	for _, f := range files {
		owner, _, moved := strings.Cut(f, corruptMark)
		switch {
		case moved && own[owner]:
			aside[owner] = append(aside[owner], f)
		default:
			boxes = append(boxes, f)
		}
	}
	return boxes, aside
}

// copiesUnder is every copy named by paths: a file as it is; under a directory, every regular
// file named *.db or state.db*, at any depth (one directory per box is how copies arrive).
func copiesUnder(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fail(1, "no state file at %s: %v", p, err)
		}
		if !fi.IsDir() {
			out = append(out, p)
			continue
		}
		err = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			n := d.Name()
			if d.Type().IsRegular() && (strings.HasSuffix(n, ".db") || strings.HasPrefix(n, "state.db") || strings.Contains(n, ".db"+corruptMark)) {
				out = append(out, q)
			}
			return nil
		})
		if err != nil {
			return nil, fail(1, "read %s: %v", p, err)
		}
	}
	return out, nil
}

// triageOne reads one copy as `status --state-file` does, as of at (zero: its newest tick). A
// corrupt copy is read as far as it can be, as explain reads it: its row stays unreadable (a
// person looks; it is not the box's present), with the host, env, state and codes the reading
// found, so the box can be told apart, and the reading's words as its error.
func triageOne(path string, at time.Time) triageRow {
	r := triageRow{File: path, Codes: []string{}}
	st, words, salvaged, cleanup, err := openCopy(path)
	defer cleanup()
	if err != nil {
		r.Verdict, r.Error = verdictUnreadable, err.Error()
		return r
	}
	s, err := explain.BuildStatusCopyAsOf(st, at)
	if err != nil {
		r.Verdict, r.Error = verdictUnreadable, err.Error()
		return r
	}
	r.Host, r.EnvID, r.State, r.Next, r.Verdict, r.Who = s.Host, s.EnvID, s.State, s.Next, s.Verdict, s.Who
	if salvaged != nil {
		r.Verdict, r.Who, r.Error = verdictUnreadable, "", words
	}
	r.Codes = append(r.Codes, s.Codes...)
	if s.Why != nil && !s.Why.Since.IsZero() {
		r.Since = s.Why.Since.UTC().Format(time.RFC3339)
	}
	if s.ParksAt != nil {
		r.ParksAt = s.ParksAt.UTC().Format(time.RFC3339)
	}
	return r
}

func triageRank(v string) int {
	switch v {
	case verdictNeedsPerson:
		return 0
	case verdictUnreadable:
		return 1
	case verdictWorking:
		return 2
	}
	return 3
}

// writeTriage prints one line per box (and one under it per moved-aside file), then one line
// counting each verdict.
func writeTriage(w io.Writer, rows []triageRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tHOST\tENV\tVERDICT\tWHO\tCODES\tSINCE\tPARKS")
	counts := map[string]int{}
	for _, r := range rows {
		host, env, who, codes, since, parks := r.Host, r.EnvID, r.Who, strings.Join(r.Codes, ","), r.Since, r.ParksAt
		if r.Error != "" {
			codes = r.Error
		}
		for _, p := range []*string{&host, &env, &who, &codes, &since, &parks} {
			if *p == "" {
				*p = "-"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.File, host, env, r.Verdict, who, strings.Join(strings.Fields(codes), " "), since, parks)
		for _, m := range r.MovedAside {
			fmt.Fprintf(tw, "  └ %s\t\t\tmoved aside\t\t\t\t\n", m)
		}
		counts[r.Verdict]++
	}
	_ = tw.Flush()
	var parts []string
	for _, v := range []string{verdictNeedsPerson, verdictUnreadable, verdictWorking, verdictConverged} {
		if counts[v] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", v, counts[v]))
		}
	}
	fmt.Fprintf(w, "%d box(es): %s\n", len(rows), strings.Join(parts, ", "))
}
