package explain

import (
	"time"

	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/store"
)

// ReportWhy is the `why` a failed report carries (PROTOCOL.md §1): the box's verdict in the
// words explain uses, strings only. The caller redacts it like the report's detail and may cut
// Evidence and Fix (ending "…") to keep the report within its bound; never the others.
type ReportWhy struct {
	Code string `json:"code"`
	// Reason is the typed cause behind Code (docs/JOURNAL.md, "Reasons"; not in PROTOCOL.md
	// §1's first shape: an older tenancy ignores it).
	Reason   string `json:"reason,omitempty"`
	Verdict  string `json:"verdict"` // working | needs_person
	Since    string `json:"since"`   // RFC 3339, UTC
	Fault    string `json:"fault"`
	Evidence string `json:"evidence"`
	Next     string `json:"next"`
	Fix      string `json:"fix"`
	// Codes are every active code, Code first (not in PROTOCOL.md §1's shape: an older
	// tenancy ignores it).
	Codes []string `json:"codes,omitempty"`
}

// Report is the why block as a report carries it; nil for nil.
func (w *Why) Report() *ReportWhy {
	if w == nil {
		return nil
	}
	since := w.Since
	if since.IsZero() {
		since = w.At
	}
	r := &ReportWhy{Code: string(w.Code), Reason: string(w.Reason), Verdict: w.Verdict, Fault: w.Fault, Evidence: w.Evidence, Next: w.Next, Fix: w.Fix}
	if !since.IsZero() {
		r.Since = since.UTC().Format(time.RFC3339)
	}
	return r
}

// WhyOf is the one verdict, read from the state file in tx as of now: what a report's `why`
// carries (nil when nothing is wrong) and the whole verdict (codes, next, converged). A tick
// that reports holds the lock: pass Limits.TickRunning.
func WhyOf(tx store.Tx, now time.Time, lim Limits) (*ReportWhy, Verdict, error) {
	in, err := ReadWith(tx, now, lim)
	if err != nil {
		return nil, Verdict{}, err
	}
	v := Decide(in)
	r := v.Why.Report()
	if r != nil {
		r.Codes = v.Codes
	}
	return r, v, nil
}

// LimitsOf are the limits and paths of a box's config (nil: the defaults, no paths).
func LimitsOf(cfg *config.Config) Limits {
	if cfg == nil {
		return Limits{}
	}
	return Limits{
		StuckAfter: time.Duration(cfg.StuckAfterS) * time.Second,
		StaleAfter: time.Duration(cfg.StaleAfterS) * time.Second,
		Paths: Paths{StateDir: cfg.StateDir, DeployDir: cfg.DeployDir, Config: cfg.Path,
			BootstrapPath: cfg.BootstrapPath, BaoCAFile: cfg.Bao.CAFile},
	}
}
