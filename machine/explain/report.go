package explain

import (
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/internal/config"
	"github.com/tikali/monky-deployd/store"
)

// Report is the why block as a report carries it (PROTOCOL.md §1: strings only); nil for nil.
// The caller redacts it like the report's detail and may cut Evidence and Fix (ending "…") to
// keep the report within its bound; never the others.
func (w *Why) Report() *effects.ReportWhy {
	if w == nil {
		return nil
	}
	since := w.Since
	if since.IsZero() {
		since = w.At
	}
	r := &effects.ReportWhy{Code: string(w.Code), Reason: string(w.Reason), Verdict: w.Verdict, Fault: w.Fault, Evidence: w.Evidence, Next: w.Next, Fix: w.Fix}
	if !since.IsZero() {
		r.Since = since.UTC().Format(time.RFC3339)
	}
	return r
}

// WhyOf is the one verdict, read from the state file in tx as of now: what a report's `why`
// carries (nil when nothing is wrong) and the whole verdict (every active code, next,
// converged). A tick that reports holds the lock: pass Limits.TickRunning.
func WhyOf(tx store.Tx, now time.Time, lim Limits) (*effects.ReportWhy, Verdict, error) {
	in, err := ReadWith(tx, now, lim)
	if err != nil {
		return nil, Verdict{}, err
	}
	v := Decide(in)
	return v.Why.Report(), v, nil
}

// LimitsOf are the limits and paths of a box's config (nil: the defaults, no paths), and what
// keeps it from writing its own files now (Unwritable: a statfs of state_dir and deploy_dir).
func LimitsOf(cfg *config.Config) Limits {
	if cfg == nil {
		return Limits{}
	}
	return Limits{
		StuckAfter: time.Duration(cfg.StuckAfterS) * time.Second,
		StaleAfter: time.Duration(cfg.StaleAfterS) * time.Second,
		Unwritable: Unwritable(cfg.StateDir, cfg.DeployDir),
		Paths: Paths{StateDir: cfg.StateDir, DeployDir: cfg.DeployDir, Config: cfg.Path,
			BootstrapPath: cfg.BootstrapPath, BaoCAFile: cfg.Bao.CAFile, BaoAddr: cfg.Bao.Addr, Transport: cfg.Transport, Identity: cfg.Identity},
	}
}
