package machine

import "time"

// Policy the states and the explain views share.
const (
	// LeaseLimit is tenancy's budget: leases per environment per rolling LeaseWindow.
	LeaseLimit = 5
	// LeaseWindow is the lease budget's rolling window.
	LeaseWindow = time.Hour
	// MaxAttempts is how many failed applies of one sha are retried before the machine parks.
	MaxAttempts = 5
)
