package sim

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tikali/monky-deployd/effects"
)

// The verdicts of a fleet row besides a why's own (effects.VerdictWorking, VerdictNeedsPerson).
const (
	VerdictConverged = "converged" // the last report is applied
	VerdictRetired   = "retired"   // the last report is down
	VerdictFailed    = "failed"    // a failed report without a why (an agent before 2026-12-01)
	VerdictSilent    = "silent"    // no report yet
)

// FleetRow is one env as the control plane sees it: its last report and that report's why.
type FleetRow struct {
	Env     string             `json:"env"`
	Verdict string             `json:"verdict"`
	Code    string             `json:"code,omitempty"`
	Since   string             `json:"since,omitempty"`
	Next    string             `json:"next,omitempty"`
	Result  string             `json:"result,omitempty"` // the last report's result
	Sha     string             `json:"sha,omitempty"`
	At      *time.Time         `json:"at,omitempty"` // when the last report came
	Why     *effects.ReportWhy `json:"why,omitempty"`
}

// Fleet is every env's row, grouped by code: the rows with a code first (by code, then env),
// then the others by env. With all false, only the rows with a code: what needs a look.
func (s *Sim) Fleet(all bool) []FleetRow {
	s.mu.Lock()
	rows := make([]FleetRow, 0, len(s.envs))
	for id, e := range s.envs {
		r := FleetRow{Env: id, Verdict: VerdictSilent}
		if n := len(e.reports); n > 0 {
			rep := e.reports[n-1]
			at := e.lastAt.UTC()
			r.Result, r.Sha, r.At = rep.Result, rep.Sha, &at
			switch {
			case rep.Why != nil:
				w := *rep.Why
				r.Why, r.Verdict, r.Code, r.Since, r.Next = &w, w.Verdict, w.Code, w.Since, w.Next
			case rep.Result == effects.ResultFailed:
				code, _, _ := strings.Cut(rep.Detail, ":")
				r.Verdict, r.Code, r.Since = VerdictFailed, code, at.Format(time.RFC3339)
			case rep.Result == effects.ResultDown:
				r.Verdict, r.Since = VerdictRetired, at.Format(time.RFC3339)
			default:
				r.Verdict = VerdictConverged
			}
		}
		if all || r.Code != "" {
			rows = append(rows, r)
		}
	}
	s.mu.Unlock()
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if (a.Code == "") != (b.Code == "") {
			return a.Code != ""
		}
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		return a.Env < b.Env
	})
	return rows
}

// FleetCounts is how many envs stand at each code, and at each verdict without a code.
func (s *Sim) FleetCounts() map[string]int {
	out := map[string]int{}
	for _, r := range s.Fleet(true) {
		k := r.Code
		if k == "" {
			k = r.Verdict
		}
		out[k]++
	}
	return out
}

// WriteFleet prints rows as the fleet table: one line per env (env, verdict, code, since,
// next), grouped by code, then one line counting each group.
func WriteFleet(w io.Writer, rows []FleetRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ENV\tVERDICT\tCODE\tSINCE\tNEXT")
	counts := map[string]int{}
	var order []string
	for _, r := range rows {
		code, since, next := r.Code, r.Since, r.Next
		for _, p := range []*string{&code, &since, &next} {
			if *p == "" {
				*p = "-"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Env, r.Verdict, code, since, oneLine(next))
		k := r.Code
		if k == "" {
			k = r.Verdict
		}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	_ = tw.Flush()
	parts := make([]string, 0, len(order))
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing to show")
	}
	fmt.Fprintf(w, "%d env(s): %s\n", len(rows), strings.Join(parts, ", "))
}

// oneLine keeps a table row on one line whatever the agent wrote.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
