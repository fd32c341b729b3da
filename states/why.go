package states

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/redact"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

// boxWhy is the box's verdict and its why as explain words them, read from the state file as of
// now: the one source of a failed report's why (PROTOCOL.md §1), explain's one verdict.
func boxWhy(tx store.Tx, now time.Time, lim explain.Limits) (*effects.ReportWhy, error) {
	w, _, err := explain.WhyOf(tx, now, lim)
	if err != nil || w == nil {
		return nil, err
	}
	return &effects.ReportWhy{Code: w.Code, Verdict: w.Verdict, Since: w.Since,
		Fault: w.Fault, Evidence: w.Evidence, Next: w.Next, Fix: w.Fix}, nil
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
