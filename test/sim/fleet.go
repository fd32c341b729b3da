package sim

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/vocab"
)

// The verdicts of a fleet row besides a why's own (effects.VerdictWorking, VerdictNeedsPerson).
const (
	VerdictConverged = "converged" // the last report is applied, of the desired sha, and the box speaks
	VerdictRetired   = "retired"   // the last report is down
	VerdictFailed    = "failed"    // a failed report without a why (an agent before 2026-12-01)
	VerdictSilent    = "silent"    // no check-in or report for longer than stale_after_s (or none yet)
)

// FleetRow is one env as the control plane sees it: its last report and that report's why, and
// how long ago the box last spoke. A box silent past stale_after_s is silent whatever it said
// last: its last words are kept in Said, with their age.
type FleetRow struct {
	Env      string             `json:"env"`
	Verdict  string             `json:"verdict"`
	Code     string             `json:"code,omitempty"`
	Since    string             `json:"since,omitempty"`
	Next     string             `json:"next,omitempty"`
	Result   string             `json:"result,omitempty"` // the last report's result
	Sha      string             `json:"sha,omitempty"`
	At       *time.Time         `json:"at,omitempty"`        // when the last report came
	LastSeen *time.Time         `json:"last_seen,omitempty"` // the last check-in or report
	Said     string             `json:"said,omitempty"`      // a silent box's last verdict, as it said it then
	Why      *effects.ReportWhy `json:"why,omitempty"`
}

// Fleet is every env's row, grouped by code: the rows with a code first (by code, then env),
// then the others by env. With all false, only the rows that need a look: a code, a box that
// does not converge, a box that fell silent.
func (s *Sim) Fleet(all bool) []FleetRow {
	s.mu.Lock()
	now := s.now()
	rows := make([]FleetRow, 0, len(s.envs))
	for id, e := range s.envs {
		r := s.fleetRowLocked(id, e, now)
		if all || r.Code != "" || (r.Verdict != VerdictConverged && r.Verdict != VerdictRetired && r.LastSeen != nil) {
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

// fleetRowLocked decides one env's row at now: what its last report says, unless the box has
// since fallen silent (no check-in or report for StaleAfter) or checks in without applying the
// sha desired of it (stuck before a report, on OpenBao say): never converged then.
func (s *Sim) fleetRowLocked(id string, e *env, now time.Time) FleetRow {
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
	if e.last != nil && e.last.Why != nil && e.last.Why.Code == string(vocab.Held) && r.Verdict != effects.VerdictNeedsPerson && r.Verdict != VerdictFailed {
		// a held box's check-in says so (PROTOCOL.md §1): its hold, not a stuck apply
		w := *e.last.Why
		r.Why, r.Verdict, r.Code, r.Since, r.Next = &w, w.Verdict, w.Code, w.Since, w.Next
	}
	if e.lastSeenAt.IsZero() {
		return r
	}
	seen := e.lastSeenAt.UTC()
	r.LastSeen = &seen
	if quiet := now.Sub(seen); quiet > s.opts.StaleAfter {
		said := r.Verdict
		if r.Code != "" {
			said += " " + r.Code
		}
		if r.Next != "" {
			said += ": " + r.Next
		}
		r.Said = fmt.Sprintf("%s (said %s ago)", said, age(now.Sub(e.lastAt)))
		if len(e.reports) == 0 {
			r.Said = fmt.Sprintf("no report yet (last check-in %s ago)", age(quiet))
		}
		r.Verdict, r.Since = VerdictSilent, seen.Format(time.RFC3339)
		r.Next = fmt.Sprintf("no check-in for %s (stale after %s): the timer, the mesh or the box; on the box: monky-deployd status. It said then: %s",
			age(quiet), age(s.opts.StaleAfter), r.Said)
		return r
	}
	if r.Verdict == VerdictConverged && r.Code == "" && e.desired != "" && r.Sha != e.desired && !e.retired {
		// it checks in but has not applied what is desired: no report comes until it does or fails
		since := e.desiredAt
		if e.lastAt.After(since) {
			since = e.lastAt
		}
		waited := now.Sub(since)
		r.Verdict, r.Since = effects.VerdictWorking, since.UTC().Format(time.RFC3339)
		r.Next = fmt.Sprintf("desired %s for %s, still applied %s: it checks in and has not reported the apply", short(e.desired), age(waited), short(r.Sha))
		if waited > s.opts.StuckAfter {
			r.Verdict = effects.VerdictNeedsPerson
			r.Next += fmt.Sprintf(" — past stuck_after_s (%s): on the box, monky-deployd status names what holds it (OpenBao, tenancy's lease, the mesh)", age(s.opts.StuckAfter))
		}
	}
	return r
}

// age is a duration as the fleet table shows it: whole seconds, minutes or hours.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Minute).String()
	}
	return d.Round(time.Hour).String()
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
