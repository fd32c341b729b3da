package states

import (
	"time"

	"github.com/tikali/monky-deployd/effects"
	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
)

// boxWhy is the box's verdict and its why as explain words them, read from the state file as of
// now: the one source of a failed report's why (PROTOCOL.md §1), explain's one verdict.
func boxWhy(tx store.Tx, now time.Time, lim explain.Limits) (*effects.ReportWhy, error) {
	w, _, err := explain.WhyOf(tx, now, lim)
	return w, err
}
