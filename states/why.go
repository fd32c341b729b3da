package states

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/explain"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/machine"
	"github.com/tikali/monky-deployd/store"
)

// boxWhy is the box's verdict and its why as explain words them, read from the state file as of
// now: the one source of a failed report's why (PROTOCOL.md §1).
func boxWhy(tx store.Tx, now time.Time) (*effects.ReportWhy, error) {
	in, err := explain.Read(tx, now)
	if err != nil {
		return nil, err
	}
	w := explain.Decide(in).Why
	if w == nil {
		return nil, nil
	}
	since := ""
	if !w.At.IsZero() {
		since = w.At.UTC().Format(time.RFC3339)
	}
	return &effects.ReportWhy{Code: w.Code, Verdict: verdictOf(in.Rec), Since: since,
		Fault: w.Fault, Evidence: w.Evidence, Next: w.Next, Fix: w.Fix}, nil
}

// verdictOf is needs_person for what will not clear without one (AGENT.md, 2026-12-01 "One
// verdict"): a refusal, a block, a parked failure, a heartbeat that found a service unwell;
// working for what clears by itself (a failure before its retry, a temporary fault).
func verdictOf(rec store.Record) string {
	switch machine.State(rec.State) {
	case machine.Failed:
		if rec.Action == effects.ActionApply && !rec.Parked {
			return effects.VerdictWorking
		}
		return effects.VerdictNeedsPerson
	case machine.Refused, machine.Blocked:
		return effects.VerdictNeedsPerson
	}
	if rec.Action == effects.ActionNone && rec.LastReport != nil && rec.LastReport.Result == effects.ResultFailed {
		return effects.VerdictNeedsPerson
	}
	return effects.VerdictWorking
}

// withWhy is the failed report rep with the box's why, redacted and cut so the whole report
// stays within effects.MaxReportBytes: evidence first, then fix, are cut (ending "…"); the other
// fields never are. Any other report goes without one.
func withWhy(rep effects.Report, w *effects.ReportWhy) effects.Report {
	if rep.Result != effects.ResultFailed || w == nil {
		rep.Why = nil
		return rep
	}
	c := *w
	for _, f := range []*string{&c.Code, &c.Verdict, &c.Since, &c.Fault, &c.Evidence, &c.Next, &c.Fix} {
		*f = redact.String(*f)
	}
	rep.Why = &c
	for _, f := range []*string{&c.Evidence, &c.Fix} {
		over := reportSize(rep) - effects.MaxReportBytes
		if over <= 0 {
			break
		}
		*f = cutTo(*f, len(*f)-over)
		// JSON escapes can make the cut fall short: cut again until it fits or is gone
		for reportSize(rep) > effects.MaxReportBytes && *f != "" && *f != "…" {
			*f = cutTo(*f, len(*f)-len(*f)/8-8)
		}
	}
	return rep
}

func reportSize(rep effects.Report) int {
	b, _ := json.Marshal(rep)
	return len(b)
}

// cutTo cuts s to at most n bytes, "…" included, on a rune boundary ("" when nothing fits).
func cutTo(s string, n int) string {
	const ell = "…"
	if len(s) <= n {
		return s
	}
	n -= len(ell)
	if n < 0 {
		n = 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ell
}
