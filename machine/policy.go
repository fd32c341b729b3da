package machine

import (
	"time"

	"github.com/tikali/monky-deployd/store"
)

// Policy the states and the explain views share.
const (
	// LeaseLimit is tenancy's budget: leases per environment per rolling LeaseWindow.
	LeaseLimit = 5
	// LeaseWindow is the lease budget's rolling window.
	LeaseWindow = time.Hour
	// MaxAttempts is how many failed applies of one sha are retried before the machine parks.
	MaxAttempts = 5
	// PruneEvery is how many ticks pass between two applications of the journal's retention
	// (and two looks at whether the state file wants compacting).
	PruneEvery = 60
)

// LeaseBudget reads the leases asked in the rolling window as of now, and when the oldest of
// them leaves it (zero when none was asked).
func LeaseBudget(tx store.Tx, now time.Time) (int, time.Time, error) {
	evs, err := tx.Leases(now.Add(-LeaseWindow))
	if err != nil || len(evs) == 0 {
		return 0, time.Time{}, err
	}
	return len(evs), evs[0].At.Add(LeaseWindow), nil
}
