package testkit

import (
	"context"
	"sync"
	"time"
)

// Epoch is where a test's clock starts unless the test says otherwise: 2026-11-29 14:00 UTC.
var Epoch = time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)

// Clock is a fake clock for code that takes a Now func (the agent, the simulator). It moves
// only when told to, and is safe for concurrent use, so the agent and the simulator can
// share one.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock d forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Sleep advances the clock by d and returns at once: a stand-in for a sleep function that
// honours its context.
func (c *Clock) Sleep(_ context.Context, d time.Duration) error {
	c.Advance(d)
	return nil
}
