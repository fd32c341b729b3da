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

	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

// Support triage of many copies: `status --state-file A B …` or `status --state-file DIR` reads
// every copy as `status --state-file` reads one (as of its newest tick, no config, writing
// nothing) and prints one line per box — file, env, verdict, codes, since — the boxes that need
// a person first. It exits 1 when one of them needs a person or cannot be read.

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
	EnvID   string   `json:"env_id"`
	Verdict string   `json:"verdict"`
	Codes   []string `json:"codes"`
	Since   string   `json:"since,omitempty"` // RFC 3339: when the fault began (the why's since)
	State   string   `json:"state,omitempty"`
	Next    string   `json:"next,omitempty"`
	Error   string   `json:"error,omitempty"`
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

// triageArgs is the copies to read and whether to print JSON: a --json among the paths (flags
// after the first path are not parsed as flags) counts as the flag.
func triageArgs(first string, more []string, asJSON bool) ([]string, bool) {
	paths := []string{first}
	for _, a := range more {
		if a == "--json" || a == "-json" {
			asJSON = true
			continue
		}
		paths = append(paths, a)
	}
	return paths, asJSON
}

// statusCopies is the triage of every copy under paths.
func statusCopies(paths []string, asJSON bool, stdout io.Writer) error {
	files, err := copiesUnder(paths)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fail(1, "no state file under %s (a copy is a file named *.db or state.db*)", strings.Join(paths, ", "))
	}
	rows := make([]triageRow, 0, len(files))
	for _, f := range files {
		rows = append(rows, triageOne(f))
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if a, b := triageRank(rows[i].Verdict), triageRank(rows[j].Verdict); a != b {
			return a < b
		}
		return rows[i].File < rows[j].File
	})
	if asJSON {
		if err := writeJSON(stdout, rows); err != nil {
			return err
		}
	} else {
		writeTriage(stdout, rows)
	}
	for _, r := range rows {
		if r.Verdict == verdictNeedsPerson || r.Verdict == verdictUnreadable {
			return &exitError{code: 1}
		}
	}
	return nil
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
			if d.Type().IsRegular() && (strings.HasSuffix(n, ".db") || strings.HasPrefix(n, "state.db")) {
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

// triageOne reads one copy as `status --state-file` does.
func triageOne(path string) triageRow {
	r := triageRow{File: path, Codes: []string{}}
	st, err := store.OpenBolt(path, store.BoltOptions{ReadOnly: true})
	if err != nil {
		r.Verdict, r.Error = verdictUnreadable, err.Error()
		return r
	}
	s, err := explain.BuildStatusCopy(st)
	if err != nil {
		r.Verdict, r.Error = verdictUnreadable, err.Error()
		return r
	}
	r.EnvID, r.State, r.Next, r.Verdict = s.EnvID, s.State, s.Next, s.Verdict
	r.Codes = append(r.Codes, s.Codes...)
	if s.Why != nil && !s.Why.Since.IsZero() {
		r.Since = s.Why.Since.UTC().Format(time.RFC3339)
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

// writeTriage prints one line per box, then one line counting each verdict.
func writeTriage(w io.Writer, rows []triageRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tENV\tVERDICT\tCODES\tSINCE")
	counts := map[string]int{}
	for _, r := range rows {
		env, codes, since := r.EnvID, strings.Join(r.Codes, ","), r.Since
		if r.Error != "" {
			codes = r.Error
		}
		for _, p := range []*string{&env, &codes, &since} {
			if *p == "" {
				*p = "-"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.File, env, r.Verdict, strings.Join(strings.Fields(codes), " "), since)
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
